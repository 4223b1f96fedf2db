// Images a second through the training input pipeline: JPEG decode, RandomResizedCrop,
// horizontal flip and normalisation (EncodedSource over an image folder), batch after batch in a
// shuffled order, on --threads decoding threads. tools/data/bench_images.sh runs it against
// torchvision's DataLoader:
//   bazel run //tools/data:image_pipeline_bench -- --images=DIR --threads=2
#include <sys/resource.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "trainer/cli/args.h"
#include "trainer/data/encoded_images.h"
#include "trainer/data/encoded_source.h"
#include "trainer/data/sampler.h"
#include "trainer/tensor/tensor.h"

ABSL_FLAG(std::string, images, "", "the image folder: one sub-folder of JPEGs per class");
ABSL_FLAG(int, threads, 1, "decoding threads");
ABSL_FLAG(int, batch_size, 64, "images a batch");
ABSL_FLAG(double, warmup, 2, "seconds of batches before the measured ones");
ABSL_FLAG(double, seconds, 10, "seconds measured (whole batches: the last one ends past it)");
ABSL_FLAG(int64_t, batches, 0, "measure this many batches instead of --seconds (0: by time)");
ABSL_FLAG(int, image_size, 224, "the side of a training sample");
ABSL_FLAG(uint64_t, seed, 1, "the shuffled order's and the crops' seed");

namespace cohort {
namespace {

// This process's CPU time, user and system, all threads.
absl::Duration ProcessCpuTime() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

// Batches of a new permutation every epoch, as a training loop draws them.
class Batches {
 public:
  Batches(int64_t n, int64_t batch, uint64_t seed) : n_(n), batch_(batch), seed_(seed) {}

  EpochKeys keys() const { return {seed_, epoch_}; }

  absl::Span<const int64_t> Next() {
    if (perm_.empty() || next_ + batch_ > n_) {
      if (!perm_.empty()) ++epoch_;
      perm_ = EpochPermutation(seed_, epoch_, n_);
      next_ = 0;
    }
    absl::Span<const int64_t> batch(perm_.data() + next_, static_cast<size_t>(batch_));
    next_ += batch_;
    return batch;
  }

 private:
  const int64_t n_;
  const int64_t batch_;
  const uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t next_ = 0;
  std::vector<int64_t> perm_;
};

int Run() {
  const std::string dir = ResolveUserPath(absl::GetFlag(FLAGS_images), UserDirectory());
  const int threads = absl::GetFlag(FLAGS_threads);
  const int64_t batch = absl::GetFlag(FLAGS_batch_size);
  const int64_t measured_batches = absl::GetFlag(FLAGS_batches);
  if (dir.empty() || threads < 1 || batch < 1 || measured_batches < 0) {
    std::cerr << "image_pipeline_bench: error: give --images=DIR, --threads >= 1 and "
                 "--batch_size >= 1 (see --help)\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<EncodedImages>> images =
      OpenEncodedImages("imagefolder:" + dir, {});
  if (!images.ok()) {
    std::cerr << "image_pipeline_bench: error: " << images.status().message() << "\n";
    return 1;
  }
  if ((*images)->size() < batch) {
    std::cerr << "image_pipeline_bench: error: " << (*images)->name() << " holds "
              << (*images)->size() << " images, fewer than a batch of " << batch << "\n";
    return 1;
  }
  EncodedSourceOptions options;
  options.transform.random_resized_crop = true;
  options.transform.horizontal_flip = true;
  options.transform.train_size = absl::GetFlag(FLAGS_image_size);
  options.threads = threads;
  options.train = true;
  EncodedSource source(*std::move(images), options, &std::cerr);
  Batches batches(source.size(), batch, absl::GetFlag(FLAGS_seed));
  Tensor x, y(Shape{0}, DType::kI32);
  auto gather = [&]() {
    const EpochKeys keys = batches.keys();
    return source.Gather(batches.Next(), &keys, &x, &y);
  };

  const absl::Time warm_until = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_warmup));
  while (absl::Now() < warm_until) {
    if (absl::Status s = gather(); !s.ok()) {
      std::cerr << "image_pipeline_bench: error: " << s.message() << "\n";
      return 1;
    }
  }
  const absl::Duration period = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  const absl::Duration cpu0 = ProcessCpuTime();
  const absl::Time t0 = absl::Now();
  int64_t done = 0;
  auto more = [&]() {
    return measured_batches > 0 ? done < measured_batches : absl::Now() - t0 < period;
  };
  while (more()) {
    if (absl::Status s = gather(); !s.ok()) {
      std::cerr << "image_pipeline_bench: error: " << s.message() << "\n";
      return 1;
    }
    ++done;
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = absl::ToDoubleSeconds(ProcessCpuTime() - cpu0);
  const double rate = static_cast<double>(done * batch) / wall;
  std::cout << absl::StrFormat(
      "cohort: %.1f images/s with %d thread%s (%.1f per thread); %d images in %.2f s, "
      "%.2f CPU-seconds a second\n",
      rate, threads, threads == 1 ? "" : "s", rate / threads, done * batch, wall, cpu / wall);
  return 0;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Images a second through the training input pipeline (decode, RandomResizedCrop, flip,\n"
      "normalise) of an image folder.\n"
      "  bazel run //tools/data:image_pipeline_bench -- --images=DIR --threads=2");
  if (!cohort::ParseCanonicalCommandLine("image_pipeline_bench", argc, argv, {})) return 2;
  return cohort::Run();
}
