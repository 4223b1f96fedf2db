#include "trainer/data/synthetic.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "trainer/base/check.h"
#include "trainer/base/random.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

constexpr int64_t kTargetBytes = int64_t{256} << 20;
constexpr int64_t kMaxSampleBytes = int64_t{4} << 20;
constexpr int64_t kMaxClasses = 1000000;
constexpr uint64_t kTrainSeed = 1;
constexpr uint64_t kTestSeed = 2;

absl::Status BadSpec(const std::string& dataset, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--dataset=", dataset, ": ", why,
      "; expected synthetic:CxHxW:K (K classes of C×H×W images, e.g. synthetic:3x224x224:1000), "
      "synthetic-imagenet or synthetic-cifar10"));
}

bool ParsePositive(absl::string_view text, int64_t max, int64_t* value) {
  return absl::SimpleAtoi(text, value) && *value >= 1 && *value <= max;
}

}  // namespace

ImageDataset MakeSyntheticDataset(Shape sample_shape, int num_classes, int64_t n, uint64_t seed,
                                  std::string name) {
  COHORT_CHECK(sample_shape.rank() == 3 && num_classes > 0 && n >= 0,
               "shape %s, %d classes, %ld samples", sample_shape.ToString().c_str(), num_classes,
               n);
  ImageDataset d;
  d.name = std::move(name);
  d.num_classes = num_classes;
  Rng rng(seed);
  d.labels.resize(static_cast<size_t>(n));
  for (int32_t& label : d.labels) label = static_cast<int32_t>(rng.Below(num_classes));
  d.pixels.resize(static_cast<size_t>(n * sample_shape.numel()));
  // Eight pixels from each draw.
  for (size_t i = 0; i < d.pixels.size(); i += 8) {
    const uint64_t bits = rng.Next();
    std::memcpy(d.pixels.data() + i, &bits, std::min<size_t>(8, d.pixels.size() - i));
  }
  d.sample_shape = std::move(sample_shape);
  return d;
}

bool IsSyntheticName(const std::string& dataset) { return dataset.rfind("synthetic", 0) == 0; }

int64_t SyntheticTrainSize(const Shape& sample_shape) {
  return std::clamp<int64_t>(kTargetBytes / sample_shape.numel(), 256, 50000);
}

absl::StatusOr<SyntheticSpec> ParseSyntheticName(const std::string& dataset) {
  if (dataset == "synthetic-imagenet") return SyntheticSpec{Shape{3, 224, 224}, 1000};
  if (dataset == "synthetic-cifar10") return SyntheticSpec{Shape{3, 32, 32}, 10};
  const std::vector<absl::string_view> parts = absl::StrSplit(dataset, ':');
  if (parts.size() != 3 || parts[0] != "synthetic") return BadSpec(dataset, "unknown form");
  std::vector<int64_t> chw;
  int64_t bytes = 1;  // checked as it grows, so it cannot overflow
  for (absl::string_view text : absl::StrSplit(parts[1], 'x')) {
    int64_t dim = 0;
    if (!ParsePositive(text, kMaxSampleBytes, &dim)) {
      return BadSpec(dataset, absl::StrCat("'", parts[1], "' is not CxHxW"));
    }
    chw.push_back(dim);
    bytes *= dim;
    if (bytes > kMaxSampleBytes) {
      return BadSpec(dataset, absl::StrCat("a ", parts[1], " sample is over the ",
                                           kMaxSampleBytes, "-byte (4 MiB) limit"));
    }
  }
  if (chw.size() != 3) return BadSpec(dataset, absl::StrCat("'", parts[1], "' is not CxHxW"));
  int64_t classes = 0;
  if (!ParsePositive(parts[2], kMaxClasses, &classes)) {
    return BadSpec(dataset, absl::StrCat("'", parts[2], "' is not a class count in [1, ",
                                         kMaxClasses, "]"));
  }
  return SyntheticSpec{Shape(std::move(chw)), static_cast<int>(classes)};
}

absl::StatusOr<TrainTestData> LoadSyntheticData(const std::string& dataset) {
  ASSIGN_OR_RETURN(const SyntheticSpec spec, ParseSyntheticName(dataset));
  const int64_t n = SyntheticTrainSize(spec.sample_shape);
  TrainTestData d;
  d.train = MakeSyntheticDataset(spec.sample_shape, spec.num_classes, n, kTrainSeed,
                                 dataset + " train");
  d.test = MakeSyntheticDataset(spec.sample_shape, spec.num_classes, std::max<int64_t>(n / 8, 64),
                                kTestSeed, dataset + " test");
  return d;
}

}  // namespace cohort
