#ifndef COHORT_TRAINER_DATA_SAMPLE_SOURCE_H_
#define COHORT_TRAINER_DATA_SAMPLE_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "trainer/data/augment.h"
#include "trainer/data/dataset.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// Input normalisation x = (pixel/255 − mean[c]) / std[c]: one value for every channel, or one
// per channel. Exported in the model's metadata.
struct ChannelNormalization {
  std::vector<float> mean;
  std::vector<float> std;
};

// What fixes a training batch's random augmentation: each sample's draw is a function of
// (seed, epoch, sample index) alone (Contracts, "Sampler").
struct EpochKeys {
  uint64_t seed = 0;
  int64_t epoch = 0;
};

// The samples of one split as the model takes them: decoded images held in memory, or encoded
// ones decoded batch by batch. Gather is called from one thread at a time.
class SampleSource {
 public:
  virtual ~SampleSource() = default;

  virtual std::string name() const = 0;
  virtual int64_t size() const = 0;
  virtual const Shape& sample_shape() const = 0;  // (C, H, W) of a sample as gathered
  virtual int num_classes() const = 0;
  virtual ChannelNormalization normalization() const = 0;

  // The samples `indices` in order: images (B, C, H, W) F32 normalised, labels (B) I32, resized
  // with their buffers reused. For training (train not null) augmented as (train->seed,
  // train->epoch, index) says; for evaluation as they are. A sample that cannot be read is an
  // error naming where it is stored.
  virtual absl::Status Gather(absl::Span<const int64_t> indices, const EpochKeys* train,
                              Tensor* images, Tensor* labels) = 0;

  // Damaged samples skipped (replaced) so far; safe to read while another thread gathers.
  virtual int64_t skipped() const { return 0; }
};

// Images held decoded in memory (IDX, CIFAR-10, synthetic), augmented as `augmentation` says
// (augment.h) for training.
class InMemorySource final : public SampleSource {
 public:
  InMemorySource(ImageDataset data, const Normalization& norm, const Augmentation& augmentation)
      : data_(std::move(data)), norm_(norm), augmentation_(augmentation) {}

  std::string name() const override { return data_.name; }
  int64_t size() const override { return data_.size(); }
  const Shape& sample_shape() const override { return data_.sample_shape; }
  int num_classes() const override { return data_.num_classes; }
  ChannelNormalization normalization() const override { return {{norm_.mean}, {norm_.std}}; }
  const ImageDataset& data() const { return data_; }

  absl::Status Gather(absl::Span<const int64_t> indices, const EpochKeys* train, Tensor* images,
                      Tensor* labels) override;

 private:
  const ImageDataset data_;
  const Normalization norm_;
  const Augmentation augmentation_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_SAMPLE_SOURCE_H_
