#ifndef COHORT_TRAINER_DATA_AUGMENT_H_
#define COHORT_TRAINER_DATA_AUGMENT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "trainer/data/dataset.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// Random training-time augmentation, as torchvision's RandomCrop(size, padding=crop_padding)
// followed by RandomHorizontalFlip(): zero-pad the image by crop_padding pixels per side (pixel
// value 0), crop the original size at a uniformly random offset, then mirror left-right with
// probability 1/2.
struct Augmentation {
  int crop_padding = 0;
  bool horizontal_flip = false;

  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

// What fixes the augmentation of a training batch: each sample's draw is a function of
// (seed, epoch, sample index) alone, never of rank, batch position or thread (Contracts,
// "Sampler"), so W workers and one process with the global batch see the same pixels.
struct EpochAugmentation {
  Augmentation augmentation;
  uint64_t seed = 0;
  int64_t epoch = 0;
};

// One sample's draw: output pixel (c, y, x) is input pixel (c, y + dy, x' + dx) with
// x' = flip ? W−1−x : x, and pixel value 0 outside the image. dy and dx are in [−p, p]
// (torchvision's crop offset in the padded image minus p).
struct CropFlip {
  int dy = 0;
  int dx = 0;
  bool flip = false;
};

// The draw for sample `index` in `epoch`: a pure function of its arguments.
CropFlip DrawCropFlip(const Augmentation& augmentation, uint64_t seed, int64_t epoch,
                      int64_t index);

// Writes one sample cropped and flipped as t says, each pixel mapped through table.
// src: (C, H, W) bytes of sample_shape; dst: (C, H, W) floats.
void AugmentSample(const uint8_t* src, const Shape& sample_shape, const CropFlip& t,
                   const PixelTable& table, float* dst);

// GatherBatch (dataset.h) for training: gathers, augments and normalises in one pass.
// images: (B, C, H, W) F32, labels: (B) I32, resized with their buffers reused.
void GatherBatch(const ImageDataset& data, absl::Span<const int64_t> indices,
                 const Normalization& norm, const EpochAugmentation& augment, Tensor* images,
                 Tensor* labels);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_AUGMENT_H_
