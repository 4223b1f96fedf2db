#ifndef COHORT_TRAINER_DATA_SYNTHETIC_H_
#define COHORT_TRAINER_DATA_SYNTHETIC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/data/dataset.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// n samples of sample_shape (C, H, W) with uniformly random pixels and labels in
// [0, num_classes), a function of seed alone. For throughput runs: there is nothing to learn.
ImageDataset MakeSyntheticDataset(Shape sample_shape, int num_classes, int64_t n, uint64_t seed,
                                  std::string name);

// True for every name LoadSyntheticData handles, well-formed or not: those starting "synthetic".
bool IsSyntheticName(const std::string& dataset);

struct SyntheticSpec {
  Shape sample_shape;  // (C, H, W)
  int num_classes = 0;
};

// Parses "synthetic:CxHxW:K" (K classes of C×H×W images, e.g. synthetic:3x224x224:1000) and
// the aliases "synthetic-imagenet" (3x224x224, 1000 classes) and "synthetic-cifar10" (3x32x32,
// 10 classes). A malformed name, or a sample over 4 MiB, is InvalidArgument naming the form.
absl::StatusOr<SyntheticSpec> ParseSyntheticName(const std::string& dataset);

// Train split size for synthetic data of this shape: about 256 MiB of pixels,
// clamp(256 MiB / (C·H·W bytes), 256, 50000) samples. The test split has max(train/8, 64).
int64_t SyntheticTrainSize(const Shape& sample_shape);

// Both splits of a synthetic dataset named as ParseSyntheticName reads, made from fixed seeds and
// sized by SyntheticTrainSize.
absl::StatusOr<TrainTestData> LoadSyntheticData(const std::string& dataset);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_SYNTHETIC_H_
