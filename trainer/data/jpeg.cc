#include "trainer/data/jpeg.h"

#include <turbojpeg.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace cohort {

namespace {

struct HandleCloser {
  void operator()(void* handle) const { tjDestroy(handle); }
};

// One decompressor per thread: a handle is not thread-safe, and making one costs allocations.
// A header libjpeg read but which is refused can leave the handle unable to read the next one:
// it is made again after a failure.
std::unique_ptr<void, HandleCloser>& ThreadDecompressor() {
  thread_local std::unique_ptr<void, HandleCloser> handle(tjInitDecompress());
  return handle;
}

// What the bytes look like when they are not a JPEG, for the message.
const char* Kind(absl::string_view bytes) {
  if (absl::StartsWith(bytes, "\x89PNG")) return "a PNG";
  if (absl::StartsWith(bytes, "GIF8")) return "a GIF";
  if (absl::StartsWith(bytes, "BM")) return "a BMP";
  if (absl::StartsWith(bytes, "RIFF")) return "a RIFF (WebP?) file";
  return "not a JPEG";
}

absl::Status DecodeWith(tjhandle handle, absl::string_view bytes,
                        absl::FunctionRef<int(int width, int height)> scale_denominator,
                        absl::string_view where, RgbImage* image) {
  if (!absl::StartsWith(bytes, "\xff\xd8")) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s (%d bytes; a JPEG starts with FF D8): decode only JPEGs, or convert it", where,
        Kind(bytes), bytes.size()));
  }
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, data, bytes.size(), &width, &height, &subsampling,
                          &colorspace) != 0) {
    return absl::DataLossError(absl::StrFormat("%s: a JPEG whose header does not read: %s",
                                               where, tjGetErrorStr2(handle)));
  }
  if (width <= 0 || height <= 0) {
    return absl::DataLossError(
        absl::StrFormat("%s: a JPEG whose header says %dx%d: a damaged header", where, width,
                        height));
  }
  if (static_cast<int64_t>(width) * height > kMaxJpegPixels) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a JPEG of %dx%d, over %d megapixels: refused (no photo of a dataset is that large; "
        "a damaged header?)",
        where, width, height, kMaxJpegPixels >> 20));
  }
  const int d = scale_denominator(width, height);
  if (d != 1 && d != 2 && d != 4 && d != 8) {
    return absl::InternalError(
        absl::StrFormat("%s: a JPEG scale of 1/%d asked for; only 1/1, 1/2, 1/4, 1/8", where, d));
  }
  const tjscalingfactor scale{1, d};
  image->width = TJSCALED(width, scale);
  image->height = TJSCALED(height, scale);
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const size_t pixels = static_cast<size_t>(image->width) * image->height;
  // CMYK goes through a buffer of its own; anything else straight into the caller's.
  std::vector<uint8_t> cmyk_pixels;
  std::vector<uint8_t>& decoded = cmyk ? cmyk_pixels : image->pixels;
  decoded.resize(pixels * (cmyk ? 4 : 3));
  // Of libjpeg's warnings, a file cut short (the rest decodes to grey) is damage; others, as
  // extraneous bytes before a marker (a few ImageNet files), leave a whole image.
  if (tjDecompress2(handle, data, bytes.size(), decoded.data(), image->width, 0, image->height,
                    cmyk ? TJPF_CMYK : TJPF_RGB, TJFLAG_ACCURATEDCT) != 0) {
    const std::string said = tjGetErrorStr2(handle);
    if (tjGetErrorCode(handle) != TJERR_WARNING || absl::StrContains(said, "Premature end")) {
      return absl::DataLossError(absl::StrFormat("%s: a damaged JPEG (%dx%d, %d bytes): %s",
                                                 where, width, height, bytes.size(), said));
    }
  }
  if (!cmyk) return absl::OkStatus();
  image->pixels.resize(pixels * 3);
  for (size_t i = 0, o = 0; i < decoded.size(); i += 4, o += 3) {
    const int k = decoded[i + 3];
    for (int c = 0; c < 3; ++c) {
      image->pixels[o + c] = static_cast<uint8_t>((decoded[i + c] * k + 127) / 255);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeJpegScaled(absl::string_view bytes,
                              absl::FunctionRef<int(int width, int height)> scale_denominator,
                              absl::string_view where, RgbImage* image) {
  std::unique_ptr<void, HandleCloser>& handle = ThreadDecompressor();
  if (handle == nullptr) handle.reset(tjInitDecompress());
  if (handle == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat("%s: no JPEG decompressor", where));
  }
  absl::Status status = DecodeWith(handle.get(), bytes, scale_denominator, where, image);
  if (!status.ok()) handle.reset(tjInitDecompress());
  return status;
}

absl::StatusOr<RgbImage> DecodeJpeg(absl::string_view bytes, int min_side,
                                    absl::string_view where) {
  RgbImage image;
  // The most reduction that keeps the shorter side at least min_side.
  const absl::Status status = DecodeJpegScaled(
      bytes,
      [min_side](int width, int height) {
        for (const int d : {8, 4, 2}) {
          if (min_side > 0 &&
              TJSCALED(std::min(width, height), (tjscalingfactor{1, d})) >= min_side) {
            return d;
          }
        }
        return 1;
      },
      where, &image);
  if (!status.ok()) return status;
  return image;
}

absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int width, int height,
                                       int channels, int quality) {
  if (channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a JPEG of %d channels: only grey (1) or RGB (3)", channels));
  }
  std::unique_ptr<void, HandleCloser> handle(tjInitCompress());
  unsigned char* out = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): libjpeg-turbo's type
  if (handle == nullptr ||
      tjCompress2(handle.get(), pixels, width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB,
                  &out, &size, channels == 1 ? TJSAMP_GRAY : TJSAMP_444, quality,
                  TJFLAG_ACCURATEDCT) != 0) {
    const std::string why = handle == nullptr ? "no compressor" : tjGetErrorStr2(handle.get());
    tjFree(out);
    return absl::InternalError(
        absl::StrFormat("encoding a %dx%d JPEG: %s", width, height, why));
  }
  std::string jpeg(reinterpret_cast<const char*>(out), size);
  tjFree(out);
  return jpeg;
}

}  // namespace cohort
