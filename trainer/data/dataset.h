#ifndef COHORT_TRAINER_DATA_DATASET_H_
#define COHORT_TRAINER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// Labelled 8-bit images held in memory.
struct ImageDataset {
  std::string name;     // e.g. "fashion-mnist train"
  Shape sample_shape;   // (C, H, W)
  int num_classes = 0;
  std::vector<uint8_t> pixels;  // size() · C·H·W bytes, C·H·W order per sample
  std::vector<int32_t> labels;  // in [0, num_classes)

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

struct TrainTestData {
  ImageDataset train;
  ImageDataset test;
};

// The dataset names --dataset accepts (including the synthetic:CxHxW:K form), and where
// each dataset read from disk is installed by default.
std::vector<std::string> DatasetNames();
std::string DefaultDataDir(const std::string& dataset);

// Loads an IDX image/label pair (e.g. "train-images-idx3-ubyte.gz" + "train-labels-...")
// from dir, checking that counts agree and labels are in [0, num_classes).
absl::StatusOr<ImageDataset> LoadIdxImages(const std::string& dir, const std::string& prefix,
                                           int num_classes, const std::string& name);

// Loads a named dataset's train and test splits: "fashion-mnist" and "mnist" (IDX files),
// "cifar10" (the CIFAR-10 binary version), or synthetic data (see synthetic.h), which ignores
// data_dir. An empty data_dir means the default one. A dataset that is not on disk is NotFound.
absl::StatusOr<TrainTestData> LoadDataset(const std::string& dataset, const std::string& data_dir);

// Zero-pads every image equally on every side to height × width (pixel value 0, before
// normalisation), e.g. 28×28 → 32×32 adds 2 pixels per side. A difference that is negative or
// odd is InvalidArgument. Compute the normalisation before padding: padding shifts it.
absl::StatusOr<ImageDataset> PadImages(const ImageDataset& data, int64_t height, int64_t width);

// Input normalisation x = (pixel/255 − mean) / std; the statistics come from the training split
// and go into the exported model's metadata.
struct Normalization {
  float mean = 0.0f;
  float std = 1.0f;
};
Normalization ComputeNormalization(const ImageDataset& data);

// The normalised value of each of the 256 pixel values: the normalisation is the same for every
// pixel, so gathering is one lookup per pixel.
struct PixelTable {
  explicit PixelTable(const Normalization& norm);
  float value[256];
};

// Makes images (B, C, H, W) F32 for samples of `sample` shape and labels (B) I32, keeping their
// buffers when the shapes are already those: building a Shape allocates, and this runs every
// step.
void ResizeBatch(const Shape& sample, int64_t b, Tensor* images, Tensor* labels);

// Assembles a batch in the order of indices: images (B, C, H, W) F32 normalised, labels (B) I32.
// Resizes both (their buffers are reused from step to step). For evaluation; training batches
// use the overload in augment.h.
void GatherBatch(const ImageDataset& data, absl::Span<const int64_t> indices,
                 const Normalization& norm, Tensor* images, Tensor* labels);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_DATASET_H_
