#ifndef COHORT_TRAINER_DATA_JPEG_H_
#define COHORT_TRAINER_DATA_JPEG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Larger JPEGs are refused before any memory is taken for them.
inline constexpr int64_t kMaxJpegPixels = int64_t{64} << 20;

// An image as 8-bit RGB: height x width x 3, row-major.
struct RgbImage {
  int height = 0;
  int width = 0;
  std::vector<uint8_t> pixels;
};

// Decodes a JPEG with libjpeg-turbo: colour, greyscale (its grey in all three channels) or
// CMYK (Adobe's inverted form, as Photoshop writes it: R = C·K/255). When min_side > 0 and the
// image is large enough, it is decoded scaled down by 1/2, 1/4 or 1/8 (the most that keeps its
// shorter side at least min_side: what a crop resized smaller anyway needs, at a fraction of
// the work). Any damage, a cut-off file included, is an error naming `where` and what libjpeg
// said; a PNG or other non-JPEG is named as such.
absl::StatusOr<RgbImage> DecodeJpeg(absl::string_view bytes, int min_side,
                                    absl::string_view where);

// DecodeJpeg with the reduction chosen by the caller once the full size is known (a crop drawn
// on it, say): scale_denominator(width, height) returns d in {1, 2, 4, 8} and the image is
// decoded at ceil(width / d) x ceil(height / d) (libjpeg-turbo's TJSCALED) into *image, whose
// buffer is reused. Pixel x of the result covers full-size pixels [x·d, (x+1)·d) (the scaled
// IDCT shrinks each 8x8 block), so a box maps to it by 1/d, not by the ratio of the sizes, which
// is rounded up. Errors as DecodeJpeg's; *image is then unspecified.
absl::Status DecodeJpegScaled(absl::string_view bytes,
                              absl::FunctionRef<int(int width, int height)> scale_denominator,
                              absl::string_view where, RgbImage* image);

// A JPEG of 8-bit pixels, height x width x channels row-major (1: grey, 3: RGB), with 4:4:4
// chroma at the given quality (1-100), by libjpeg-turbo.
absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int width, int height,
                                       int channels, int quality);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_JPEG_H_
