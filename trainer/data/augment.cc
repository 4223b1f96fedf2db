#include "trainer/data/augment.h"

#include <algorithm>

#include "trainer/base/check.h"
#include "trainer/base/random.h"

namespace cohort {
namespace {

// Keeps augmentation streams apart from any other stream keyed by (seed, epoch, index).
constexpr uint64_t kAugmentSalt = 0xa3c59ac2f1e04b17ULL;

}  // namespace

CropFlip DrawCropFlip(const Augmentation& augmentation, uint64_t seed, int64_t epoch,
                      int64_t index) {
  const int p = augmentation.crop_padding;
  COHORT_CHECK(p >= 0, "crop padding %d", p);
  Rng rng(MixKeys({seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index),
                   kAugmentSalt}));
  const uint64_t offsets = 2 * static_cast<uint64_t>(p) + 1;
  CropFlip t;
  t.dy = static_cast<int>(rng.Below(offsets)) - p;
  t.dx = static_cast<int>(rng.Below(offsets)) - p;
  t.flip = augmentation.horizontal_flip && (rng.Next() >> 63) != 0;
  return t;
}

void AugmentSample(const uint8_t* src, const Shape& sample_shape, const CropFlip& t,
                   const PixelTable& table, float* dst) {
  const int64_t channels = sample_shape[0], h = sample_shape[1], w = sample_shape[2];
  const float zero = table.value[0];
  // Columns x' whose source column x' + dx is inside the image: [lo, hi), possibly empty.
  const int64_t lo = std::min<int64_t>(w, std::max<int64_t>(0, -t.dx));
  const int64_t hi = std::max<int64_t>(lo, std::min<int64_t>(w, w - t.dx));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < h; ++y) {
      float* out = dst + (c * h + y) * w;
      const int64_t sy = y + t.dy;
      if (sy < 0 || sy >= h) {
        std::fill(out, out + w, zero);
        continue;
      }
      const uint8_t* row = src + (c * h + sy) * w;
      if (!t.flip) {
        std::fill(out, out + lo, zero);
        for (int64_t x = lo; x < hi; ++x) out[x] = table.value[row[x + t.dx]];
        std::fill(out + hi, out + w, zero);
      } else {
        // out[x] takes column x' = w−1−x, so x' in [lo, hi) means x in [w−hi, w−lo).
        std::fill(out, out + (w - hi), zero);
        for (int64_t x = w - hi; x < w - lo; ++x) out[x] = table.value[row[w - 1 - x + t.dx]];
        std::fill(out + (w - lo), out + w, zero);
      }
    }
  }
}

void GatherBatch(const ImageDataset& data, absl::Span<const int64_t> indices,
                 const Normalization& norm, const EpochAugmentation& augment, Tensor* images,
                 Tensor* labels) {
  const int64_t b = static_cast<int64_t>(indices.size());
  const Shape& s = data.sample_shape;
  ResizeBatch(s, b, images, labels);
  const PixelTable table(norm);
  const int64_t per = s.numel();
  const bool random = augment.augmentation.enabled();
  float* x = images->data<float>();
  int32_t* y = labels->data<int32_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t index = indices[i];
    COHORT_CHECK(index >= 0 && index < data.size(), "sample %ld of %s (%ld samples)", index,
                 data.name.c_str(), data.size());
    const CropFlip t = random ? DrawCropFlip(augment.augmentation, augment.seed, augment.epoch,
                                             index)
                              : CropFlip{};
    AugmentSample(data.pixels.data() + index * per, s, t, table, x + i * per);
    y[i] = data.labels[index];
  }
}

}  // namespace cohort
