#include "trainer/data/image_export.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer/data/jpeg.h"

namespace cohort {
namespace {

int Digits(int64_t n) {
  int digits = 1;
  for (; n >= 10; n /= 10) ++digits;
  return digits;
}

}  // namespace

absl::Status WriteJpegFolder(const ImageDataset& data, const std::string& dir, int quality,
                             int64_t limit, std::ostream& progress) {
  namespace fs = std::filesystem;
  const int64_t channels = data.sample_shape[0], h = data.sample_shape[1],
                w = data.sample_shape[2];
  if (channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        data.name, ": images of ", channels, " channels cannot be JPEGs (1 or 3 only)"));
  }
  const int64_t n = limit > 0 ? std::min(limit, data.size()) : data.size();
  fs::path folder = fs::path(dir).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();  // "out/train/"
  const std::string name = folder.filename().string();
  const int class_digits = Digits(std::max(0, data.num_classes - 1));
  const int sample_digits = Digits(std::max<int64_t>(0, n - 1));
  std::error_code made;
  for (int c = 0; c < data.num_classes; ++c) {
    fs::create_directories(folder / absl::StrFormat("%0*d", class_digits, c), made);
    if (made) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot make ", folder.string(), ": ", made.message()));
    }
  }
  std::ofstream list(folder.string() + ".lst", std::ios::trunc);
  std::vector<uint8_t> interleaved(static_cast<size_t>(h * w * channels));
  const int64_t per = data.sample_shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    // (C, H, W) planes to the (H, W, C) rows a JPEG holds.
    const uint8_t* planes = data.pixels.data() + i * per;
    for (int64_t p = 0; p < h * w; ++p) {
      for (int64_t c = 0; c < channels; ++c) interleaved[p * channels + c] = planes[c * h * w + p];
    }
    absl::StatusOr<std::string> jpeg =
        EncodeJpeg(interleaved.data(), static_cast<int>(w), static_cast<int>(h),
                   static_cast<int>(channels), quality);
    if (!jpeg.ok()) return jpeg.status();
    const std::string relative = absl::StrFormat("%0*d/%0*d.jpg", class_digits, data.labels[i],
                                                 sample_digits, i);
    std::ofstream out(folder / relative, std::ios::binary | std::ios::trunc);
    out << *jpeg;
    list << i << '\t' << data.labels[i] << '\t' << name << '/' << relative << '\n';
    if (!out) return absl::DataLossError(absl::StrCat("cannot write ", (folder / relative).string()));
    if ((i + 1) % 10000 == 0 || i + 1 == n) {
      progress << absl::StrFormat("%s: %d of %d images written to %s\n", data.name, i + 1, n,
                                  folder.string())
               << std::flush;
    }
  }
  list.close();
  if (!list) return absl::DataLossError(absl::StrCat("cannot write ", folder.string(), ".lst"));
  return absl::OkStatus();
}

}  // namespace cohort
