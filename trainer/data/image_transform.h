#ifndef COHORT_TRAINER_DATA_IMAGE_TRANSFORM_H_
#define COHORT_TRAINER_DATA_IMAGE_TRANSFORM_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "trainer/data/jpeg.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// What turns an encoded image into a model's input, as torchvision's ImageNet recipe does:
// training RandomResizedCrop(train_size, scale, ratio) + RandomHorizontalFlip() + Normalize;
// evaluation Resize(eval_resize) of the shorter side + CenterCrop(eval_size) + Normalize.
// Resampling is PIL's bilinear filter (a triangle widened by the reduction when shrinking, so
// a crop shrunk 4x averages its pixels instead of skipping them), which torchvision uses on
// PIL images.
struct ImageTransformOptions {
  int channels = 3;  // 3: RGB; 1: luma (PIL's "L": (299 R + 587 G + 114 B) / 1000)
  int train_size = 224;
  // Training samples are cut as evaluation samples are (then flipped) when not set.
  bool random_resized_crop = true;
  double min_scale = 0.08;  // of the image's area
  double max_scale = 1.0;
  double min_ratio = 3.0 / 4.0;  // width / height
  double max_ratio = 4.0 / 3.0;
  bool horizontal_flip = true;
  int eval_resize = 256;
  int eval_size = 224;
  // Per channel (the first `channels` are used), on pixel values scaled to [0, 1].
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

// A region of a source image in its pixel coordinates (a pixel's centre is at +0.5), as PIL's
// resize(box=...) takes it: resampling it to out_height x out_width is one scaling per axis.
struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// Where a training sample comes from: torchvision's RandomResizedCrop.get_params (ten tries at
// a random area and aspect ratio, log-uniform ratio, then the centre crop of the clamped ratio)
// and the flip, a pure function of (seed, epoch, index): never of rank or thread. Without
// random_resized_crop, the evaluation box (EvalBox), flipped at random.
struct TrainDraw {
  Box box;  // integer-valued: a crop of whole pixels
  bool flip = false;
};
TrainDraw DrawTrainCrop(int width, int height, const ImageTransformOptions& options,
                        uint64_t seed, int64_t epoch, int64_t index);

// Where an evaluation sample comes from: the eval_size window at the centre of the image resized
// so its shorter side is eval_resize (torchvision's sizes and offsets, rounded as it rounds
// them), as a box of the original image.
Box EvalBox(int width, int height, const ImageTransformOptions& options);

// Resamples `box` of an RGB image to (C, out_height, out_width) floats, mirrored left-right when
// flip, converted to options.channels and normalised. Plain loops, one output value at a time
// with the 2-D filter written out: what ResampleNormalized is tested against.
void ReferenceResampleNormalized(const RgbImage& image, const Box& box, int out_height,
                                 int out_width, bool flip, const ImageTransformOptions& options,
                                 float* dst);

// Turns encoded images into normalised samples. Holds scratch buffers that grow to the largest
// image seen: one per thread.
class ImageTransformer {
 public:
  explicit ImageTransformer(const ImageTransformOptions& options);

  // (C, size, size) of a training or evaluation sample.
  Shape sample_shape(bool train) const;

  // Decodes `bytes` (a JPEG: decoded scaled down by libjpeg-turbo when the crop stays at least
  // the output size) and writes the training sample for (seed, epoch, index) to dst,
  // (C, train_size, train_size) floats. Errors name `where`.
  absl::Status Train(absl::string_view bytes, uint64_t seed, int64_t epoch, int64_t index,
                     absl::string_view where, float* dst);
  // The evaluation sample, (C, eval_size, eval_size) floats.
  absl::Status Eval(absl::string_view bytes, absl::string_view where, float* dst);

  // The separable form of ReferenceResampleNormalized (same arguments and result within float
  // rounding): a horizontal pass into scratch rows, then a vertical pass.
  void ResampleNormalized(const RgbImage& image, const Box& box, int out_height, int out_width,
                          bool flip, float* dst);

 private:
  // One axis of the filter: output i reads the `count[i]` source pixels from `first[i]` with
  // weights[i * ksize + k], k < count[i] (normalised to sum 1).
  struct Taps {
    int ksize = 0;
    std::vector<int> first;
    std::vector<int> count;
    std::vector<float> weights;
  };

  // PIL's bilinear taps for resampling [in0, in1) of in_size pixels to out_size, the outputs'
  // order reversed when mirror.
  static void ComputeTaps(double in0, double in1, int in_size, int out_size, bool mirror,
                          Taps* taps);

  const ImageTransformOptions options_;
  Taps horizontal_;  // already mirrored when flip
  Taps vertical_;
  std::vector<float> line_;  // one source row's columns that are read, as floats
  std::vector<float> rows_;  // the horizontal pass: (source rows read, 3, out_width)
  RgbImage decoded_;         // the last decoded JPEG, its buffer reused
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_IMAGE_TRANSFORM_H_
