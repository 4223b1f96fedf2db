#include "trainer/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "trainer/base/check.h"
#include "trainer/base/random.h"

namespace cohort {
namespace {

// Keeps the crop-and-flip stream apart from any other stream keyed by (seed, epoch, index).
constexpr uint64_t kImageTransformSalt = 0x5b1e7c3d09a4f28bULL;

// PIL's bilinear filter: a triangle of support 1, widened by the reduction when shrinking.
double Triangle(double x) { return std::max(0.0, 1.0 - std::abs(x)); }

// Python's round(): halves to even, as torchvision's sizes are rounded.
int RoundHalfEven(double x) { return static_cast<int>(std::nearbyint(x)); }

// The largest JPEG reduction 1/d that keeps the box's shorter side at least `size` pixels, so
// the resampling still shrinks (or copies) and never enlarges what the full image would give.
int Reduction(const Box& box, int size) {
  const double shorter = std::min(box.x1 - box.x0, box.y1 - box.y0);
  for (const int d : {8, 4, 2}) {
    if (shorter / d >= size) return d;
  }
  return 1;
}

// A full-size box in the pixels of the image decoded at 1/d (see DecodeJpegScaled).
Box Reduce(const Box& box, int d) { return Box{box.x0 / d, box.y0 / d, box.x1 / d, box.y1 / d}; }

void CheckResample(const RgbImage& image, const Box& box, int out_height, int out_width) {
  COHORT_CHECK(out_height > 0 && out_width > 0, "output %dx%d", out_width, out_height);
  COHORT_CHECK(image.pixels.size() == static_cast<size_t>(image.width) * image.height * 3,
               "%dx%d image with %zu bytes", image.width, image.height, image.pixels.size());
  COHORT_CHECK(0 <= box.x0 && box.x0 < box.x1 && box.x1 <= image.width && 0 <= box.y0 &&
                   box.y0 < box.y1 && box.y1 <= image.height,
               "box (%g, %g, %g, %g) of a %dx%d image", box.x0, box.y0, box.x1, box.y1, image.width,
               image.height);
}

// The reference's view of one axis, PIL's precompute_coeffs for one output index written out.
struct Window {
  int lo = 0, hi = 0;  // source pixels [lo, hi)
  double center = 0, filterscale = 1;
  double Weight(int k) const { return Triangle((k - center + 0.5) / filterscale); }
};

Window PilWindow(double in0, double in1, int in_size, int out_size, int i) {
  const double scale = (in1 - in0) / out_size;
  Window w;
  w.filterscale = std::max(scale, 1.0);
  const double support = 1.0 * w.filterscale;
  w.center = in0 + (i + 0.5) * scale;
  w.lo = std::max(static_cast<int>(w.center - support + 0.5), 0);
  w.hi = std::min(static_cast<int>(w.center + support + 0.5), in_size);
  return w;
}

}  // namespace

TrainDraw DrawTrainCrop(int width, int height, const ImageTransformOptions& options, uint64_t seed,
                        int64_t epoch, int64_t index) {
  COHORT_CHECK(width > 0 && height > 0, "image %dx%d", width, height);
  Rng rng(MixKeys(
      {seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index), kImageTransformSalt}));
  TrainDraw draw;
  if (!options.random_resized_crop) {
    draw.box = EvalBox(width, height, options);
    draw.flip = options.horizontal_flip && rng.Uniform() < 0.5;
    return draw;
  }
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(options.min_ratio), log_max = std::log(options.max_ratio);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target_area = area * rng.Uniform(options.min_scale, options.max_scale);
    const double aspect = std::exp(rng.Uniform(log_min, log_max));
    const int w = RoundHalfEven(std::sqrt(target_area * aspect));
    const int h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int i = static_cast<int>(rng.Below(static_cast<uint64_t>(height - h) + 1));
      const int j = static_cast<int>(rng.Below(static_cast<uint64_t>(width - w) + 1));
      draw.box = Box{static_cast<double>(j), static_cast<double>(i), static_cast<double>(j + w),
                     static_cast<double>(i + h)};
      found = true;
    }
  }
  if (!found) {
    // The centre crop of the whole image with its ratio clamped to the allowed ones.
    const double in_ratio = static_cast<double>(width) / height;
    int w = width, h = height;
    if (in_ratio < options.min_ratio) {
      h = std::max(1, RoundHalfEven(w / options.min_ratio));
    } else if (in_ratio > options.max_ratio) {
      w = std::max(1, RoundHalfEven(h * options.max_ratio));
    }
    const int i = (height - h) / 2, j = (width - w) / 2;
    draw.box = Box{static_cast<double>(j), static_cast<double>(i), static_cast<double>(j + w),
                   static_cast<double>(i + h)};
  }
  draw.flip = options.horizontal_flip && rng.Uniform() < 0.5;
  return draw;
}

Box EvalBox(int width, int height, const ImageTransformOptions& options) {
  COHORT_CHECK(width > 0 && height > 0, "image %dx%d", width, height);
  const int size = options.eval_resize, crop = options.eval_size;
  // torchvision's Resize(int): the shorter side becomes `size`, the longer int(size·long/short)
  // (truncated, in double as Python divides).
  int new_w = size, new_h = size;
  if (width <= height) {
    new_h = static_cast<int>(static_cast<double>(int64_t{size} * height) / width);
  } else {
    new_w = static_cast<int>(static_cast<double>(int64_t{size} * width) / height);
  }
  // CenterCrop: offsets round((new - crop) / 2), halves to even.
  const int top = RoundHalfEven((new_h - crop) / 2.0);
  const int left = RoundHalfEven((new_w - crop) / 2.0);
  // Output pixel k of the full resize has its centre at (k + 0.5)·width/new_w: the box starting
  // at left·width/new_w with the same scale gives those same centres and filter.
  return Box{static_cast<double>(left) * width / new_w, static_cast<double>(top) * height / new_h,
             static_cast<double>(left + crop) * width / new_w,
             static_cast<double>(top + crop) * height / new_h};
}

void ReferenceResampleNormalized(const RgbImage& image, const Box& box, int out_height,
                                 int out_width, bool flip, const ImageTransformOptions& options,
                                 float* dst) {
  CheckResample(image, box, out_height, out_width);
  const int channels = options.channels;
  for (int y = 0; y < out_height; ++y) {
    const Window wy = PilWindow(box.y0, box.y1, image.height, out_height, y);
    for (int x = 0; x < out_width; ++x) {
      const Window wx =
          PilWindow(box.x0, box.x1, image.width, out_width, flip ? out_width - 1 - x : x);
      double sum[3] = {0, 0, 0};
      double total = 0;
      for (int sy = wy.lo; sy < wy.hi; ++sy) {
        for (int sx = wx.lo; sx < wx.hi; ++sx) {
          const double w = wy.Weight(sy) * wx.Weight(sx);
          const uint8_t* p = &image.pixels[(static_cast<size_t>(sy) * image.width + sx) * 3];
          for (int c = 0; c < 3; ++c) sum[c] += w * p[c];
          total += w;
        }
      }
      double v[3];
      for (int c = 0; c < 3; ++c) v[c] = sum[c] / total;
      if (channels == 1) v[0] = (299 * v[0] + 587 * v[1] + 114 * v[2]) / 1000;
      for (int c = 0; c < channels; ++c) {
        dst[(static_cast<size_t>(c) * out_height + y) * out_width + x] =
            static_cast<float>((v[c] / 255 - options.mean[c]) / options.std[c]);
      }
    }
  }
}

ImageTransformer::ImageTransformer(const ImageTransformOptions& options) : options_(options) {
  COHORT_CHECK(options.channels == 1 || options.channels == 3, "channels %d", options.channels);
  COHORT_CHECK(
      options.train_size > 0 && options.eval_size > 0 && options.eval_size <= options.eval_resize,
      "train size %d, eval size %d, eval resize %d", options.train_size, options.eval_size,
      options.eval_resize);
  COHORT_CHECK(0 < options.min_scale && options.min_scale <= options.max_scale, "scale [%g, %g]",
               options.min_scale, options.max_scale);
  COHORT_CHECK(0 < options.min_ratio && options.min_ratio <= options.max_ratio, "ratio [%g, %g]",
               options.min_ratio, options.max_ratio);
}

Shape ImageTransformer::sample_shape(bool train) const {
  const int64_t size = train ? options_.train_size : options_.eval_size;
  return Shape{options_.channels, size, size};
}

absl::Status ImageTransformer::Train(absl::string_view bytes, uint64_t seed, int64_t epoch,
                                     int64_t index, absl::string_view where, float* dst) {
  // The crop is drawn on the full size, so it does not depend on the reduction. Unlike
  // torchvision's crop-then-resize, resampling a box of the whole image lets a shrinking filter
  // reach just past the crop's edges, so the outermost output pixels differ slightly; a box
  // reduced by 1/d is no longer in whole pixels anyway.
  TrainDraw draw;
  int d = 1;
  const absl::Status status = DecodeJpegScaled(
      bytes,
      [&](int width, int height) {
        draw = DrawTrainCrop(width, height, options_, seed, epoch, index);
        d = Reduction(draw.box, options_.train_size);
        return d;
      },
      where, &decoded_);
  if (!status.ok()) return status;
  ResampleNormalized(decoded_, Reduce(draw.box, d), options_.train_size, options_.train_size,
                     draw.flip, dst);
  return absl::OkStatus();
}

absl::Status ImageTransformer::Eval(absl::string_view bytes, absl::string_view where, float* dst) {
  Box box;
  int d = 1;
  const absl::Status status = DecodeJpegScaled(
      bytes,
      [&](int width, int height) {
        box = EvalBox(width, height, options_);
        d = Reduction(box, options_.eval_size);
        return d;
      },
      where, &decoded_);
  if (!status.ok()) return status;
  ResampleNormalized(decoded_, Reduce(box, d), options_.eval_size, options_.eval_size, false, dst);
  return absl::OkStatus();
}

void ImageTransformer::ComputeTaps(double in0, double in1, int in_size, int out_size, bool mirror,
                                   Taps* taps) {
  // PIL's precompute_coeffs (Resample.c) with the bilinear filter; weights summed in double.
  const double scale = (in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  const double inverse = 1.0 / filterscale;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps->ksize = ksize;
  taps->first.resize(out_size);
  taps->count.resize(out_size);
  taps->weights.resize(static_cast<size_t>(out_size) * ksize);
  for (int i = 0; i < out_size; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    COHORT_CHECK(lo < hi && hi - lo <= ksize, "taps [%d, %d) of %d", lo, hi, ksize);
    double total = 0;
    for (int k = lo; k < hi; ++k) total += Triangle((k - center + 0.5) * inverse);
    // Mirroring is only a matter of which output the taps belong to.
    const int o = mirror ? out_size - 1 - i : i;
    taps->first[o] = lo;
    taps->count[o] = hi - lo;
    float* w = &taps->weights[static_cast<size_t>(o) * ksize];
    for (int k = lo; k < hi; ++k) {
      w[k - lo] = static_cast<float>(Triangle((k - center + 0.5) * inverse) / total);
    }
  }
}

// Performance: this runs for every sample at thousands of images a second, so the hot loops
// touch only contiguous float arrays that live in members (no allocation once they have grown);
// the horizontal pass reads only the source rows and columns the filters need, each row turned
// into floats once (a vectorised loop, instead of a conversion per tap); the vertical pass is
// multiply-adds over whole output rows. The BUILD rule's -ftree-vectorize makes those plain
// loops SIMD at -O2 (about a quarter less time; no reassociation, so results do not change).
void ImageTransformer::ResampleNormalized(const RgbImage& image, const Box& box, int out_height,
                                          int out_width, bool flip, float* dst) {
  CheckResample(image, box, out_height, out_width);
  ComputeTaps(box.x0, box.x1, image.width, out_width, flip, &horizontal_);
  ComputeTaps(box.y0, box.y1, image.height, out_height, false, &vertical_);
  int row0 = image.height, row1 = 0;
  for (int y = 0; y < out_height; ++y) {
    row0 = std::min(row0, vertical_.first[y]);
    row1 = std::max(row1, vertical_.first[y] + vertical_.count[y]);
  }
  // rows_: (row1 - row0, 3, out_width), a source row filtered horizontally, planar.
  const size_t stride = 3 * static_cast<size_t>(out_width);
  rows_.resize(static_cast<size_t>(row1 - row0) * stride);
  const int hk = horizontal_.ksize;
  int col0 = image.width, col1 = 0;
  for (int x = 0; x < out_width; ++x) {
    col0 = std::min(col0, horizontal_.first[x]);
    col1 = std::max(col1, horizontal_.first[x] + horizontal_.count[x]);
  }
  line_.resize(static_cast<size_t>(col1 - col0) * 3);
  for (int r = row0; r < row1; ++r) {
    const uint8_t* src8 = &image.pixels[(static_cast<size_t>(r) * image.width + col0) * 3];
    float* line = line_.data();
    for (int i = 0, n = (col1 - col0) * 3; i < n; ++i) line[i] = src8[i];
    float* out = &rows_[static_cast<size_t>(r - row0) * stride];
    for (int x = 0; x < out_width; ++x) {
      const float* s = line + static_cast<size_t>(horizontal_.first[x] - col0) * 3;
      const float* w = &horizontal_.weights[static_cast<size_t>(x) * hk];
      float a0 = 0, a1 = 0, a2 = 0;
      for (int k = 0, n = horizontal_.count[x]; k < n; ++k) {
        a0 += w[k] * s[3 * k];
        a1 += w[k] * s[3 * k + 1];
        a2 += w[k] * s[3 * k + 2];
      }
      out[x] = a0;
      out[out_width + x] = a1;
      out[2 * out_width + x] = a2;
    }
    if (options_.channels == 1) {
      // Luma of the filtered row: the same as filtering the luma (both are linear), and what
      // the reference computes from its resampled RGB.
      for (int x = 0; x < out_width; ++x) {
        out[x] = 0.299f * out[x] + 0.587f * out[out_width + x] + 0.114f * out[2 * out_width + x];
      }
    }
  }
  const int vk = vertical_.ksize;
  for (int c = 0; c < options_.channels; ++c) {
    // (v / 255 - mean) / std as one subtraction and one multiplication.
    const float shift = 255.0f * options_.mean[c];
    const float gain = 1.0f / (255.0f * options_.std[c]);
    for (int y = 0; y < out_height; ++y) {
      float* o = dst + (static_cast<size_t>(c) * out_height + y) * out_width;
      const float* w = &vertical_.weights[static_cast<size_t>(y) * vk];
      const float* in =
          &rows_[static_cast<size_t>(vertical_.first[y] - row0) * stride + c * out_width];
      for (int x = 0; x < out_width; ++x) o[x] = w[0] * in[x];
      for (int k = 1, n = vertical_.count[y]; k < n; ++k) {
        in += stride;
        const float wk = w[k];
        for (int x = 0; x < out_width; ++x) o[x] += wk * in[x];
      }
      for (int x = 0; x < out_width; ++x) o[x] = (o[x] - shift) * gain;
    }
  }
}

}  // namespace cohort
