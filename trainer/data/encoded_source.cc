#include "trainer/data/encoded_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "trainer/base/check.h"

namespace cohort {
namespace {

// A damaged sample is replaced by one of the next ones; this many damaged in a row is no
// longer a damaged record but damaged files.
constexpr int64_t kMaxReplacements = 64;

bool SayCount(int64_t n) {
  if (n <= 10) return true;
  while (n % 10 == 0) n /= 10;
  return n == 1;
}

}  // namespace

EncodedSource::EncodedSource(std::unique_ptr<EncodedImages> images,
                             const EncodedSourceOptions& options, std::ostream* log)
    : images_(std::move(images)),
      options_(options),
      size_(options.limit > 0 ? std::min(options.limit, images_->size()) : images_->size()),
      sample_shape_(ImageTransformer(options.transform).sample_shape(options.train)),
      log_(log),
      team_(std::max(1, options.threads), [](int) {}) {
  for (int i = 0; i < team_.size(); ++i) {
    members_.push_back(std::make_unique<Member>(options.transform));
  }
}

ChannelNormalization EncodedSource::normalization() const {
  const int c = options_.transform.channels;
  const auto& t = options_.transform;
  return {{t.mean.begin(), t.mean.begin() + c}, {t.std.begin(), t.std.begin() + c}};
}

absl::Status EncodedSource::Gather(absl::Span<const int64_t> indices, const EpochKeys* train,
                                   Tensor* images, Tensor* labels) {
  COHORT_CHECK((train != nullptr) == options_.train, "a %s batch from the %s split of %s",
               train != nullptr ? "training" : "evaluation",
               options_.train ? "training" : "evaluation", name().c_str());
  const int64_t b = static_cast<int64_t>(indices.size());
  ResizeBatch(sample_shape_, b, images, labels);
  const int64_t per = sample_shape_.numel();
  float* x = images->data<float>();
  int32_t* y = labels->data<int32_t>();
  // Samples go to whichever thread is free: JPEGs differ in size several times over.
  std::atomic<int64_t> next{0};
  {
    absl::MutexLock lock(&mu_);
    failed_ = absl::OkStatus();
  }
  team_.Run([&](int member) {
    for (int64_t i; (i = next.fetch_add(1)) < b;) {
      const absl::Status done = Sample(member, indices[i], train, x + i * per, y + i);
      if (!done.ok()) {
        absl::MutexLock lock(&mu_);
        if (failed_.ok()) failed_ = done;
        next.store(b);  // the batch is lost: stop the others
      }
    }
  });
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::Status EncodedSource::Sample(int member, int64_t index, const EpochKeys* train, float* dst,
                                   int32_t* label) {
  COHORT_CHECK(index >= 0 && index < size_, "sample %ld of %s (%ld samples)", index,
               name().c_str(), size_);
  absl::Status status = Decode(member, index, index, train, dst, label);
  for (int64_t k = 1; !status.ok() && options_.skip_corrupt; ++k) {
    SaySkipped(status);
    if (k > kMaxReplacements) {
      return absl::DataLossError(absl::StrFormat(
          "%s: %d damaged samples in a row from %s on: the files are damaged (the last: %s)",
          name(), kMaxReplacements, images_->Where(index), status.message()));
    }
    status = Decode(member, (index + k) % size_, index, train, dst, label);
  }
  return status;
}

absl::Status EncodedSource::Decode(int member, int64_t stored, int64_t index,
                                   const EpochKeys* train, float* dst, int32_t* label) {
  Member& m = *members_[static_cast<size_t>(member)];
  absl::StatusOr<int64_t> read = images_->Read(stored, &m.bytes);
  if (!read.ok()) return read.status();
  const std::string where = images_->Where(stored);
  // The draw is the place's, so a replaced sample leaves every other draw as it was.
  absl::Status done = train != nullptr
                          ? m.transformer.Train(m.bytes, train->seed, train->epoch, index, where,
                                                dst)
                          : m.transformer.Eval(m.bytes, where, dst);
  if (done.ok()) *label = static_cast<int32_t>(*read);
  return done;
}

void EncodedSource::SaySkipped(const absl::Status& why) {
  const int64_t n = ++skipped_;
  if (log_ == nullptr || !SayCount(n)) return;
  absl::MutexLock lock(&mu_);
  *log_ << absl::StrFormat("data: skipped a damaged sample (%d so far, --skip_corrupt): %s\n", n,
                           why.message())
        << std::flush;
}

}  // namespace cohort
