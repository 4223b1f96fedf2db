#include "trainer/data/augment.h"

#include <cstring>
#include <set>

#include "gtest/gtest.h"
#include "trainer/data/sampler.h"
#include "trainer/data/synthetic.h"

namespace cohort {
namespace {

// Pixels as bytes again: with mean 0 and std 1/255 the table maps v to (about) v.
std::vector<int> Bytes(const std::vector<float>& x, const PixelTable& table) {
  std::vector<int> out;
  for (float v : x) {
    int b = 0;
    while (b < 256 && table.value[b] != v) ++b;
    out.push_back(b);
  }
  return out;
}

TEST(AugmentTest, HandMadeImageWithChosenCropAndFlip) {
  const Shape shape{1, 4, 4};
  std::vector<uint8_t> image(16);
  for (int i = 0; i < 16; ++i) image[i] = static_cast<uint8_t>(i + 1);  // 1 … 16, row-major
  const PixelTable table(Normalization{0.0f, 1.0f / 255});
  std::vector<float> out(16);

  // torchvision offset (top, left) = (p + 1, p − 1): shifted up one row and right one column.
  AugmentSample(image.data(), shape, CropFlip{1, -1, false}, table, out.data());
  EXPECT_EQ(Bytes(out, table), (std::vector<int>{0, 5, 6, 7,     //
                                                 0, 9, 10, 11,   //
                                                 0, 13, 14, 15,  //
                                                 0, 0, 0, 0}));
  AugmentSample(image.data(), shape, CropFlip{1, -1, true}, table, out.data());
  EXPECT_EQ(Bytes(out, table), (std::vector<int>{7, 6, 5, 0,     //
                                                 11, 10, 9, 0,   //
                                                 15, 14, 13, 0,  //
                                                 0, 0, 0, 0}));
  AugmentSample(image.data(), shape, CropFlip{-2, 2, true}, table, out.data());
  EXPECT_EQ(Bytes(out, table), (std::vector<int>{0, 0, 0, 0,  //
                                                 0, 0, 0, 0,  //
                                                 0, 0, 4, 3,  //
                                                 0, 0, 8, 7}));
  AugmentSample(image.data(), shape, CropFlip{0, 0, true}, table, out.data());
  EXPECT_EQ(Bytes(out, table), (std::vector<int>{4, 3, 2, 1,   //
                                                 8, 7, 6, 5,   //
                                                 12, 11, 10, 9,  //
                                                 16, 15, 14, 13}));
}

TEST(AugmentTest, PaddingIsPixelZeroBeforeNormalisation) {
  const std::vector<uint8_t> image(4, 255);
  const PixelTable table(Normalization{0.5f, 0.25f});
  std::vector<float> out(4);
  AugmentSample(image.data(), Shape{1, 2, 2}, CropFlip{0, 1, false}, table, out.data());
  EXPECT_EQ(out, (std::vector<float>{2.0f, -2.0f, 2.0f, -2.0f}));
}

// Pads explicitly, crops at (dy + p, dx + p), then mirrors: torchvision's order of operations.
std::vector<uint8_t> Reference(const std::vector<uint8_t>& image, int64_t c, int64_t h, int64_t w,
                               int p, const CropFlip& t) {
  const int64_t ph = h + 2 * p, pw = w + 2 * p;
  std::vector<uint8_t> padded(static_cast<size_t>(c * ph * pw), 0);
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        padded[(k * ph + y + p) * pw + x + p] = image[(k * h + y) * w + x];
  std::vector<uint8_t> out(image.size());
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t cx = t.flip ? w - 1 - x : x;
        out[(k * h + y) * w + x] = padded[(k * ph + y + t.dy + p) * pw + cx + t.dx + p];
      }
  return out;
}

TEST(AugmentTest, EveryOffsetAndFlipMatchesPadCropFlip) {
  const int64_t c = 3, h = 5, w = 7;
  const int p = 3;
  const ImageDataset d = MakeSyntheticDataset(Shape{c, h, w}, 2, 1, 4, "d");
  const PixelTable table(Normalization{0.0f, 1.0f / 255});
  std::vector<float> out(static_cast<size_t>(c * h * w));
  for (int dy = -p; dy <= p; ++dy)
    for (int dx = -p; dx <= p; ++dx)
      for (bool flip : {false, true}) {
        const CropFlip t{dy, dx, flip};
        AugmentSample(d.pixels.data(), d.sample_shape, t, table, out.data());
        const std::vector<uint8_t> want = Reference(d.pixels, c, h, w, p, t);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_EQ(out[i], table.value[want[i]]) << dy << " " << dx << " " << flip << " " << i;
        }
      }
}

TEST(AugmentTest, DrawIsAFunctionOfSeedEpochAndIndex) {
  const Augmentation aug{4, true};
  for (int64_t i = 0; i < 100; ++i) {
    const CropFlip a = DrawCropFlip(aug, 7, 2, i), b = DrawCropFlip(aug, 7, 2, i);
    EXPECT_EQ(a.dy, b.dy);
    EXPECT_EQ(a.dx, b.dx);
    EXPECT_EQ(a.flip, b.flip);
  }
  int differ_epoch = 0, differ_seed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const CropFlip a = DrawCropFlip(aug, 7, 0, i), b = DrawCropFlip(aug, 7, 1, i),
                   s = DrawCropFlip(aug, 8, 0, i);
    differ_epoch += a.dy != b.dy || a.dx != b.dx || a.flip != b.flip;
    differ_seed += a.dy != s.dy || a.dx != s.dx || a.flip != s.flip;
  }
  // 9 × 9 × 2 equally likely draws: about 1000/162 coincide.
  EXPECT_GT(differ_epoch, 970);
  EXPECT_GT(differ_seed, 970);
}

TEST(AugmentTest, OffsetsCoverTheRangeAndFlipsAreHalf) {
  const Augmentation aug{4, true};
  const int n = 20000;
  std::vector<int> dy(9, 0), dx(9, 0);
  int flips = 0;
  for (int64_t i = 0; i < n; ++i) {
    const CropFlip t = DrawCropFlip(aug, 1, 3, i);
    ASSERT_TRUE(t.dy >= -4 && t.dy <= 4 && t.dx >= -4 && t.dx <= 4) << t.dy << " " << t.dx;
    ++dy[t.dy + 4];
    ++dx[t.dx + 4];
    flips += t.flip;
  }
  for (int k = 0; k < 9; ++k) {  // n/9 ≈ 2222 each, σ ≈ 44
    EXPECT_NEAR(dy[k], n / 9.0, 250) << "offset " << k;
    EXPECT_NEAR(dx[k], n / 9.0, 250) << "offset " << k;
  }
  EXPECT_NEAR(flips, n / 2.0, 400);  // σ ≈ 71
}

TEST(AugmentTest, DisabledPartsDrawNothing) {
  for (int64_t i = 0; i < 200; ++i) {
    const CropFlip crop_only = DrawCropFlip(Augmentation{2, false}, 1, 0, i);
    EXPECT_FALSE(crop_only.flip);
    const CropFlip flip_only = DrawCropFlip(Augmentation{0, true}, 1, 0, i);
    EXPECT_EQ(flip_only.dy, 0);
    EXPECT_EQ(flip_only.dx, 0);
  }
}

std::vector<float> Pixels(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(AugmentTest, SameSampleSamePixelsAtAnyBatchPositionOrRank) {
  const ImageDataset d = MakeSyntheticDataset(Shape{3, 8, 8}, 10, 64, 2, "d");
  const Normalization norm{0.5f, 0.25f};
  const EpochAugmentation aug{Augmentation{4, true}, 11, 3};
  const int64_t per = d.sample_shape.numel();
  Tensor a, b, la(Shape{0}, DType::kI32), lb(Shape{0}, DType::kI32);
  const std::vector<int64_t> first{5, 9, 2}, second{2, 7, 5};
  GatherBatch(d, first, norm, aug, &a, &la);
  GatherBatch(d, second, norm, aug, &b, &lb);
  EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>() + 2 * per, per * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.data<float>() + 2 * per, b.data<float>(), per * sizeof(float)), 0);
  EXPECT_EQ(la.data<int32_t>()[0], lb.data<int32_t>()[2]);

  // Two ranks with batch 4 assemble exactly what one process with batch 8 does.
  Sampler single(d.size(), 11, 0, 1, 8), rank0(d.size(), 11, 0, 2, 4), rank1(d.size(), 11, 1, 2, 4);
  for (Sampler* s : {&single, &rank0, &rank1}) s->SetEpoch(3);
  Tensor whole, part0, part1, l(Shape{0}, DType::kI32);
  GatherBatch(d, single.Batch(2), norm, aug, &whole, &l);
  GatherBatch(d, rank0.Batch(2), norm, aug, &part0, &l);
  GatherBatch(d, rank1.Batch(2), norm, aug, &part1, &l);
  std::vector<float> joined = Pixels(part0);
  const std::vector<float> tail = Pixels(part1);
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, Pixels(whole));

  // A different epoch moves most samples.
  Tensor next;
  GatherBatch(d, first, norm, EpochAugmentation{Augmentation{4, true}, 11, 4}, &next, &la);
  EXPECT_NE(Pixels(next), Pixels(a));
}

TEST(AugmentTest, NoAugmentationIsThePlainGatherAndBuffersAreReused) {
  const ImageDataset d = MakeSyntheticDataset(Shape{2, 3, 5}, 4, 20, 3, "d");
  const Normalization norm{0.3f, 0.2f};
  const std::vector<int64_t> idx{4, 19, 0, 7};
  Tensor plain, plain_labels(Shape{0}, DType::kI32), aug, aug_labels(Shape{0}, DType::kI32);
  GatherBatch(d, idx, norm, &plain, &plain_labels);
  GatherBatch(d, idx, norm, EpochAugmentation{}, &aug, &aug_labels);
  EXPECT_EQ(aug.shape(), (Shape{4, 2, 3, 5}));
  EXPECT_EQ(Pixels(plain), Pixels(aug));
  const PixelTable table(norm);
  EXPECT_EQ(plain.data<float>()[30], table.value[d.pixels[19 * 30]]);  // sample 19, first pixel
  EXPECT_EQ(plain_labels.data<int32_t>()[1], d.labels[19]);

  const void* buffer = aug.raw();
  GatherBatch(d, idx, norm, EpochAugmentation{Augmentation{1, true}, 1, 0}, &aug, &aug_labels);
  EXPECT_EQ(aug.raw(), buffer);
}

}  // namespace
}  // namespace cohort
