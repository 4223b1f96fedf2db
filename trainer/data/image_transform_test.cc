#include "trainer/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// A JPEG of RGB pixels.
std::string Compress(const std::vector<uint8_t>& pixels, int width, int height, int quality = 95) {
  absl::StatusOr<std::string> jpeg = EncodeJpeg(pixels.data(), width, height, 3, quality);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status();
  return jpeg.value_or("");
}

RgbImage RandomImage(int width, int height, std::mt19937* gen) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (uint8_t& p : image.pixels) p = static_cast<uint8_t>((*gen)() & 255);
  return image;
}

// A smooth picture with some structure: JPEG keeps it within a few levels at any scale.
RgbImage SmoothImage(int width, int height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const double v = 60 + 100.0 * x / width + 50.0 * y / height + 10 * c +
                         30 * std::sin(x / 37.0 + c) * std::cos(y / 53.0);
        image.pixels[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<uint8_t>(v);
      }
    }
  }
  return image;
}

// The grey level (0..255) a normalised output value stands for.
double Grey(float v, int c, const ImageTransformOptions& options) {
  return (static_cast<double>(v) * options.std[c] + options.mean[c]) * 255;
}

double MaxGreyDifference(const std::vector<float>& a, const std::vector<float>& b, int height,
                         int width, const ImageTransformOptions& options) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int c = static_cast<int>(i / (static_cast<size_t>(height) * width));
    most = std::max(most, std::abs(Grey(a[i], c, options) - Grey(b[i], c, options)));
  }
  return most;
}

ImageTransformOptions Unnormalised(int channels = 3) {
  ImageTransformOptions options;
  options.channels = channels;
  options.mean = {0, 0, 0};
  options.std = {1, 1, 1};
  return options;
}

TEST(ImageTransformTest, FastMatchesTheReferenceOnRandomBoxes) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> unit(0, 1);
  // Source pixels per output pixel along an axis: enlarging, copying, shrinking up to 8x.
  const double reductions[] = {0.3, 0.5, 1, 1.5, 2, 3, 4.7, 8};
  for (const int channels : {3, 1}) {
    ImageTransformOptions options;
    options.channels = channels;
    ImageTransformer transformer(options);
    double most = 0;
    for (int trial = 0; trial < 96; ++trial) {
      const RgbImage image = RandomImage(40 + gen() % 100, 40 + gen() % 100, &gen);
      const int out_w = 3 + gen() % 14, out_h = 3 + gen() % 14;
      double bw = std::min<double>(out_w * reductions[trial % 8], image.width);
      double bh = std::min<double>(out_h * reductions[(trial / 8 + trial) % 8], image.height);
      double x0 = unit(gen) * (image.width - bw), y0 = unit(gen) * (image.height - bh);
      if (trial % 3 == 0) {  // whole pixels, as training crops are
        bw = std::max(1.0, std::floor(bw));
        bh = std::max(1.0, std::floor(bh));
        x0 = std::floor(x0);
        y0 = std::floor(y0);
      }
      const Box box{x0, y0, x0 + bw, y0 + bh};
      const bool flip = trial % 2 == 1;
      std::vector<float> fast(static_cast<size_t>(channels) * out_h * out_w, -99);
      std::vector<float> reference(fast.size(), 99);
      transformer.ResampleNormalized(image, box, out_h, out_w, flip, fast.data());
      ReferenceResampleNormalized(image, box, out_h, out_w, flip, options, reference.data());
      const double difference = MaxGreyDifference(fast, reference, out_h, out_w, options);
      ASSERT_LT(difference, 0.01) << "channels " << channels << " trial " << trial << " box ("
                                  << box.x0 << ", " << box.y0 << ", " << box.x1 << ", " << box.y1
                                  << ") of " << image.width << "x" << image.height << " to "
                                  << out_w << "x" << out_h << " flip " << flip;
      most = std::max(most, difference);
    }
    // Float accumulation against double: far inside one grey level.
    EXPECT_LT(most, 1e-3) << "channels " << channels;
  }
}

TEST(ImageTransformTest, ReferenceAndFastUsePilsBilinearTaps) {
  // Halving 8 pixels: interior outputs weigh 4 pixels 1:3:3:1; at the edges the triangle is
  // cut off and renormalised (3:3:1 over 7), as PIL does.
  RgbImage image;
  image.width = 8;
  image.height = 1;
  const int p[8] = {10, 200, 30, 140, 250, 0, 90, 60};
  for (int v : p) image.pixels.insert(image.pixels.end(), {uint8_t(v), uint8_t(v), uint8_t(v)});
  const double expected[4] = {
      (3.0 * p[0] + 3 * p[1] + p[2]) / 7, (p[1] + 3.0 * p[2] + 3 * p[3] + p[4]) / 8,
      (p[3] + 3.0 * p[4] + 3 * p[5] + p[6]) / 8, (p[5] + 3.0 * p[6] + 3 * p[7]) / 7};
  const ImageTransformOptions options = Unnormalised();
  ImageTransformer transformer(options);
  std::vector<float> fast(12), reference(12);
  for (const bool flip : {false, true}) {
    transformer.ResampleNormalized(image, Box{0, 0, 8, 1}, 1, 4, flip, fast.data());
    ReferenceResampleNormalized(image, Box{0, 0, 8, 1}, 1, 4, flip, options, reference.data());
    for (int c = 0; c < 3; ++c) {
      for (int x = 0; x < 4; ++x) {
        const double want = expected[flip ? 3 - x : x];
        EXPECT_NEAR(fast[c * 4 + x] * 255, want, 1e-3) << "flip " << flip << " x " << x;
        EXPECT_NEAR(reference[c * 4 + x] * 255, want, 1e-3) << "flip " << flip << " x " << x;
      }
    }
  }
}

TEST(ImageTransformTest, ALinearRampStaysLinearAtTheBoxCoordinates) {
  // Pixel x holds x (its centre at x + 0.5); a symmetric filter that does not reach the edge
  // gives the ramp at each output's centre, box.x0 + (i + 0.5)·scale, less 0.5: exactly when
  // enlarging (linear interpolation), within ~0.015 when shrinking (the widened triangle sampled
  // at whole pixels is not quite symmetric). Half a pixel off would be 0.5.
  RgbImage image;
  image.width = 200;
  image.height = 3;
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 200; ++x) {
      image.pixels.insert(image.pixels.end(), {uint8_t(x), uint8_t(x), uint8_t(x)});
    }
  }
  const ImageTransformOptions options = Unnormalised();
  ImageTransformer transformer(options);
  // Shrinking 4.07x, and enlarging 2.4x (plain linear interpolation there).
  for (const Box& box : {Box{20.3, 0.5, 170.9, 2.5}, Box{10.25, 1, 30.75, 2}}) {
    const int out_w = 37 + static_cast<int>(box.x1 < 100) * 13;
    const double scale = (box.x1 - box.x0) / out_w;
    std::vector<float> fast(3 * out_w), reference(3 * out_w);
    transformer.ResampleNormalized(image, box, 1, out_w, false, fast.data());
    ReferenceResampleNormalized(image, box, 1, out_w, false, options, reference.data());
    const double tolerance = scale > 1 ? 0.02 : 1e-3;
    for (int x = 0; x < out_w; ++x) {
      const double want = box.x0 + (x + 0.5) * scale - 0.5;
      EXPECT_NEAR(fast[x] * 255, want, tolerance) << x;
      EXPECT_NEAR(reference[x] * 255, want, tolerance) << x;
    }
  }
}

TEST(ImageTransformTest, SameSizeGivesTheSourcePixelsExactly) {
  std::mt19937 gen(3);
  const RgbImage source = RandomImage(28, 28, &gen);
  const std::string jpeg = Compress(source.pixels, 28, 28);
  absl::StatusOr<RgbImage> decoded = DecodeJpeg(jpeg, 0, "id.jpg");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  for (const bool normalised : {false, true}) {
    ImageTransformOptions options = normalised ? ImageTransformOptions() : Unnormalised();
    options.train_size = 28;
    options.min_scale = options.max_scale = 1;
    options.min_ratio = options.max_ratio = 1;
    options.horizontal_flip = false;
    options.eval_resize = options.eval_size = 28;
    ImageTransformer transformer(options);
    std::vector<float> train(3 * 28 * 28), eval(3 * 28 * 28);
    ASSERT_TRUE(transformer.Train(jpeg, 1, 2, 3, "id.jpg", train.data()).ok());
    ASSERT_TRUE(transformer.Eval(jpeg, "id.jpg", eval.data()).ok());
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 28 * 28; ++i) {
        const int p = decoded->pixels[i * 3 + c];
        const float t = train[c * 28 * 28 + i], e = eval[c * 28 * 28 + i];
        if (normalised) {
          const double want = (p / 255.0 - options.mean[c]) / options.std[c];
          ASSERT_NEAR(t, want, 1e-5) << c << " " << i;
          ASSERT_NEAR(e, want, 1e-5) << c << " " << i;
        } else {
          // One tap of weight exactly 1: nothing but the division by 255 rounds.
          ASSERT_NEAR(t * 255, p, 1e-4) << c << " " << i;
          ASSERT_NEAR(e * 255, p, 1e-4) << c << " " << i;
        }
      }
    }
  }
}

TEST(ImageTransformTest, WithoutRandomCropsTrainingCutsAsEvaluationDoesThenFlips) {
  const RgbImage source = SmoothImage(120, 90);
  const std::string jpeg = Compress(source.pixels, 120, 90);
  ImageTransformOptions options;
  options.random_resized_crop = false;
  options.train_size = options.eval_size = 32;
  options.eval_resize = 40;
  ImageTransformer transformer(options);
  std::vector<float> eval(3 * 32 * 32), train(3 * 32 * 32);
  ASSERT_TRUE(transformer.Eval(jpeg, "x.jpg", eval.data()).ok());
  int flipped = 0;
  for (int64_t index = 0; index < 40; ++index) {
    ASSERT_TRUE(transformer.Train(jpeg, 7, 1, index, "x.jpg", train.data()).ok());
    const bool flip = DrawTrainCrop(120, 90, options, 7, 1, index).flip;
    flipped += flip;
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 32; ++y) {
        for (int x = 0; x < 32; ++x) {
          const int from = flip ? 31 - x : x;
          ASSERT_NEAR(train[(c * 32 + y) * 32 + x], eval[(c * 32 + y) * 32 + from], 1e-5)
              << index << " " << c << " " << y << " " << x;
        }
      }
    }
  }
  EXPECT_GT(flipped, 5);
  EXPECT_LT(flipped, 35);
}

TEST(ImageTransformTest, LumaIsPilsWeightsOfTheResampledRgb) {
  std::mt19937 gen(5);
  const RgbImage image = RandomImage(30, 20, &gen);
  const ImageTransformOptions rgb_options = Unnormalised(3), luma_options = Unnormalised(1);
  ImageTransformer rgb(rgb_options), luma(luma_options);
  const Box box{1.5, 2.25, 27.0, 19.5};
  std::vector<float> colour(3 * 7 * 9), grey(7 * 9);
  rgb.ResampleNormalized(image, box, 7, 9, true, colour.data());
  luma.ResampleNormalized(image, box, 7, 9, true, grey.data());
  for (int i = 0; i < 7 * 9; ++i) {
    const double want = (299 * colour[i] + 587 * colour[63 + i] + 114 * colour[126 + i]) / 1000;
    EXPECT_NEAR(grey[i], want, 1e-6) << i;
  }
}

TEST(ImageTransformTest, TrainCropsAreAPureFunctionOfTheirKeys) {
  const ImageTransformOptions options;
  const TrainDraw a = DrawTrainCrop(500, 375, options, 42, 3, 1234);
  const TrainDraw b = DrawTrainCrop(500, 375, options, 42, 3, 1234);
  EXPECT_EQ(a.box.x0, b.box.x0);
  EXPECT_EQ(a.box.y0, b.box.y0);
  EXPECT_EQ(a.box.x1, b.box.x1);
  EXPECT_EQ(a.box.y1, b.box.y1);
  EXPECT_EQ(a.flip, b.flip);
  // Another index, epoch or seed gives another crop (almost surely; these keys are fixed).
  for (const TrainDraw& other : {DrawTrainCrop(500, 375, options, 42, 3, 1235),
                                 DrawTrainCrop(500, 375, options, 42, 4, 1234),
                                 DrawTrainCrop(500, 375, options, 43, 3, 1234)}) {
    EXPECT_TRUE(other.box.x0 != a.box.x0 || other.box.y0 != a.box.y0 || other.box.x1 != a.box.x1 ||
                other.box.y1 != a.box.y1);
  }
}

// E[w·h / area] of an accepted try, by integrating over a fine grid of (scale, log ratio) with
// the same acceptance rule: independent of the generator. Ten tries return the first accepted
// one, so the draws follow this conditional law (the fallback is ~never reached here).
double ExpectedAreaFraction(int width, int height, const ImageTransformOptions& options) {
  const int n = 600;
  const double area = static_cast<double>(width) * height;
  const double lo = std::log(options.min_ratio), hi = std::log(options.max_ratio);
  double sum = 0, accepted = 0;
  for (int a = 0; a < n; ++a) {
    const double s = options.min_scale + (options.max_scale - options.min_scale) * (a + 0.5) / n;
    for (int b = 0; b < n; ++b) {
      const double r = std::exp(lo + (hi - lo) * (b + 0.5) / n);
      const double w = std::nearbyint(std::sqrt(area * s * r));
      const double h = std::nearbyint(std::sqrt(area * s / r));
      if (w > 0 && w <= width && h > 0 && h <= height) {
        sum += w * h / area;
        accepted += 1;
      }
    }
  }
  return sum / accepted;
}

TEST(ImageTransformTest, TrainCropsFollowRandomResizedCrop) {
  const ImageTransformOptions options;
  const int width = 500, height = 375, draws = 20000;
  double area_sum = 0;
  int flips = 0;
  for (int index = 0; index < draws; ++index) {
    const TrainDraw draw = DrawTrainCrop(width, height, options, 9, 1, index);
    const Box& b = draw.box;
    ASSERT_TRUE(b.x0 == std::floor(b.x0) && b.y0 == std::floor(b.y0) && b.x1 == std::floor(b.x1) &&
                b.y1 == std::floor(b.y1));
    ASSERT_TRUE(0 <= b.x0 && b.x0 < b.x1 && b.x1 <= width && 0 <= b.y0 && b.y0 < b.y1 &&
                b.y1 <= height)
        << b.x0 << " " << b.y0 << " " << b.x1 << " " << b.y1;
    const double w = b.x1 - b.x0, h = b.y1 - b.y0;
    // Whole-pixel rounding of sides of at least ~100 pixels moves these by about 1%.
    const double fraction = w * h / (width * height);
    ASSERT_GE(fraction, options.min_scale * 0.98);
    ASSERT_LE(fraction, options.max_scale);
    ASSERT_GE(w / h, options.min_ratio * 0.99);
    ASSERT_LE(w / h, options.max_ratio * 1.01);
    area_sum += fraction;
    flips += draw.flip;
  }
  // Larger areas are rejected more often (they stick out), so the mean is below (0.08 + 1) / 2
  // (0.433 for 500x375).
  const double expected = ExpectedAreaFraction(width, height, options);
  EXPECT_GT(expected, 0.40);
  EXPECT_LT(expected, 0.54);
  EXPECT_NEAR(area_sum / draws, expected, 0.01);  // the mean's spread is ~0.002
  EXPECT_NEAR(static_cast<double>(flips) / draws, 0.5, 0.02);

  ImageTransformOptions no_flip;
  no_flip.horizontal_flip = false;
  for (int index = 0; index < 100; ++index) {
    EXPECT_FALSE(DrawTrainCrop(width, height, no_flip, 9, 1, index).flip);
  }
}

TEST(ImageTransformTest, ImagesOutsideTheRatiosFallBackToTheCentreCrop) {
  const ImageTransformOptions options;
  for (int index = 0; index < 50; ++index) {
    // 10x1000: no try fits; w = 10, h = round(10 / (3/4)) = 13, centred.
    const Box tall = DrawTrainCrop(10, 1000, options, 1, 0, index).box;
    EXPECT_EQ(tall.x0, 0);
    EXPECT_EQ(tall.x1, 10);
    EXPECT_EQ(tall.y0, 493);
    EXPECT_EQ(tall.y1, 506);
    // 1000x10: h = 10, w = round(10 · 4/3) = 13.
    const Box wide = DrawTrainCrop(1000, 10, options, 1, 0, index).box;
    EXPECT_EQ(wide.x0, 493);
    EXPECT_EQ(wide.x1, 506);
    EXPECT_EQ(wide.y0, 0);
    EXPECT_EQ(wide.y1, 10);
  }
}

TEST(ImageTransformTest, EvalBoxIsTorchvisionsResizeAndCenterCrop) {
  const ImageTransformOptions options;  // Resize(256), CenterCrop(224)
  // 500x375 resizes to 341x256 (int(256 · 500 / 375) = int(341.33)); the crop's top is
  // round(32 / 2) = 16 and its left round(117 / 2) = round(58.5) = 58 (halves to even).
  Box box = EvalBox(500, 375, options);
  EXPECT_DOUBLE_EQ(box.x0, 58.0 * 500 / 341);
  EXPECT_DOUBLE_EQ(box.x1, 282.0 * 500 / 341);
  EXPECT_DOUBLE_EQ(box.y0, 16.0 * 375 / 256);
  EXPECT_DOUBLE_EQ(box.y1, 240.0 * 375 / 256);
  box = EvalBox(375, 500, options);
  EXPECT_DOUBLE_EQ(box.x0, 16.0 * 375 / 256);
  EXPECT_DOUBLE_EQ(box.x1, 240.0 * 375 / 256);
  EXPECT_DOUBLE_EQ(box.y0, 58.0 * 500 / 341);
  EXPECT_DOUBLE_EQ(box.y1, 282.0 * 500 / 341);
  // A square: 256x256, offsets 16.
  box = EvalBox(300, 300, options);
  EXPECT_DOUBLE_EQ(box.x0, 16.0 * 300 / 256);
  EXPECT_DOUBLE_EQ(box.y1, 240.0 * 300 / 256);

  // Resampling the box gives the window of the whole image resized to 341x256.
  std::mt19937 gen(11);
  const RgbImage image = RandomImage(500, 375, &gen);
  std::vector<float> resized(3 * 256 * 341), window(3 * 224 * 224);
  ReferenceResampleNormalized(image, Box{0, 0, 500, 375}, 256, 341, false, options, resized.data());
  ImageTransformer transformer(options);
  transformer.ResampleNormalized(image, EvalBox(500, 375, options), 224, 224, false, window.data());
  double most = 0;
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 224; ++y) {
      for (int x = 0; x < 224; ++x) {
        const float a = resized[(c * 256 + y + 16) * 341 + x + 58];
        const float b = window[(c * 224 + y) * 224 + x];
        most = std::max(most, std::abs(Grey(a, c, options) - Grey(b, c, options)));
      }
    }
  }
  EXPECT_LT(most, 1e-3);
}

TEST(ImageTransformTest, ScaledDecodingMapsBoxesByOneOverTheReduction) {
  // A bright 2-pixel line at columns [L, L + 2) of a 333-wide image, decoded at 1/4: its
  // centroid is at (L + 1) / 4, not (L + 1) · 84 / 333 (the sizes' ratio, rounded up).
  const int width = 333, height = 32, line = 321;
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3, 20);
  for (int y = 0; y < height; ++y) {
    for (int x : {line, line + 1}) {
      for (int c = 0; c < 3; ++c) pixels[(static_cast<size_t>(y) * width + x) * 3 + c] = 250;
    }
  }
  RgbImage image;
  ASSERT_TRUE(
      DecodeJpegScaled(
          Compress(pixels, width, height, 98), [](int, int) { return 4; }, "line.jpg", &image)
          .ok());
  ASSERT_EQ(image.width, 84);  // ceil(333 / 4)
  ASSERT_EQ(image.height, 8);
  double sum = 0, moment = 0;
  for (int x = 0; x < image.width; ++x) {
    const double v = std::max(0, image.pixels[(4 * image.width + x) * 3] - 20);
    sum += v;
    moment += v * (x + 0.5);
  }
  EXPECT_NEAR(moment / sum, (line + 1) / 4.0, 0.3);
  EXPECT_GT(std::abs(moment / sum - (line + 1) * 84.0 / width), 0.5);
  // A denominator libjpeg-turbo does not offer is refused.
  const absl::Status status = DecodeJpegScaled(
      Compress(pixels, width, height), [](int, int) { return 3; }, "x.jpg", &image);
  EXPECT_FALSE(status.ok());
}

TEST(ImageTransformTest, ScaledDecodingAgreesWithFullScale) {
  const int width = 1000, height = 750;
  const RgbImage source = SmoothImage(width, height);
  const std::string jpeg = Compress(source.pixels, width, height, 92);
  absl::StatusOr<RgbImage> full = DecodeJpeg(jpeg, 0, "big.jpg");
  ASSERT_TRUE(full.ok()) << full.status();
  ImageTransformOptions options;
  options.train_size = 48;
  options.eval_resize = 64;
  options.eval_size = 56;
  ImageTransformer transformer(options);
  std::vector<float> fast(3 * 48 * 48), reference(3 * 48 * 48);
  // Scaled IDCT is not the same low-pass as the triangle over full-size pixels, and a JPEG
  // decoded at 1/d differs slightly from one decoded whole: a few grey levels at most on a
  // smooth picture.
  int scaled = 0;
  for (int index = 0; index < 24; ++index) {
    const TrainDraw draw = DrawTrainCrop(width, height, options, 5, 0, index);
    scaled += std::min(draw.box.x1 - draw.box.x0, draw.box.y1 - draw.box.y0) >= 2 * 48;
    ASSERT_TRUE(transformer.Train(jpeg, 5, 0, index, "big.jpg", fast.data()).ok());
    ReferenceResampleNormalized(*full, draw.box, 48, 48, draw.flip, options, reference.data());
    EXPECT_LT(MaxGreyDifference(fast, reference, 48, 48, options), 3.0) << "index " << index;
  }
  EXPECT_GE(scaled, 20);  // crops of at least 96 pixels: most are decoded at 1/2 or less
  std::vector<float> eval(3 * 56 * 56), eval_reference(3 * 56 * 56);
  ASSERT_TRUE(transformer.Eval(jpeg, "big.jpg", eval.data()).ok());
  ReferenceResampleNormalized(*full, EvalBox(width, height, options), 56, 56, false, options,
                              eval_reference.data());
  EXPECT_LT(MaxGreyDifference(eval, eval_reference, 56, 56, options), 3.0);
}

TEST(ImageTransformTest, DamageIsAnErrorNamingWhere) {
  const RgbImage source = SmoothImage(256, 256);
  const std::string jpeg = Compress(source.pixels, 256, 256);
  ImageTransformer transformer(ImageTransformOptions{});
  std::vector<float> out(3 * 224 * 224);
  absl::Status status =
      transformer.Train(jpeg.substr(0, jpeg.size() / 2), 1, 0, 0, "shard-3:17", out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.message(), "shard-3:17: a damaged JPEG")) << status;
  status = transformer.Eval("\x89PNG\r\n\x1a\n....", "shard-3:18", out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.message(), "shard-3:18: a PNG")) << status;
  // The transformer still works after an error.
  EXPECT_TRUE(transformer.Eval(jpeg, "shard-3:19", out.data()).ok());
}

TEST(ImageTransformTest, SampleShapes) {
  ImageTransformOptions options;
  options.channels = 1;
  options.train_size = 176;
  options.eval_size = 192;
  ImageTransformer transformer(options);
  EXPECT_EQ(transformer.sample_shape(true), (Shape{1, 176, 176}));
  EXPECT_EQ(transformer.sample_shape(false), (Shape{1, 192, 192}));
}

}  // namespace
}  // namespace cohort
