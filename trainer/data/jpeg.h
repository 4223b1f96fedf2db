#ifndef COHORT_TRAINER_DATA_JPEG_H_
#define COHORT_TRAINER_DATA_JPEG_H_

#include <cstdint>
#include <vector>

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

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_JPEG_H_
