#include "trainer/data/jpeg.h"

#include <turbojpeg.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// A JPEG of the pixels (format: TJPF_RGB, TJPF_GRAY or TJPF_CMYK), by libjpeg-turbo.
std::string Compress(const std::vector<uint8_t>& pixels, int width, int height, int format,
                     int subsampling, int quality = 95) {
  tjhandle handle = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(handle, pixels.data(), width, 0, height, format, &out, &size,
                        subsampling, quality, TJFLAG_ACCURATEDCT),
            0)
      << tjGetErrorStr2(handle);
  std::string jpeg(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(handle);
  return jpeg;
}

// A smooth picture: JPEG keeps it within a few levels.
std::vector<uint8_t> Gradient(int width, int height, int channels) {
  std::vector<uint8_t> p(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        p[(static_cast<size_t>(y) * width + x) * channels + c] =
            static_cast<uint8_t>(60 + x * 100 / width + y * 50 / height + 10 * c);
      }
    }
  }
  return p;
}

int MaxDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(a[i] - b[i]));
  return most;
}

TEST(JpegTest, ColourDecodesToTheCompressedPixels) {
  const std::vector<uint8_t> rgb = Gradient(64, 48, 3);
  absl::StatusOr<RgbImage> image = DecodeJpeg(Compress(rgb, 64, 48, TJPF_RGB, TJSAMP_444),
                                              0, "a.jpg");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 64);
  EXPECT_EQ(image->height, 48);
  EXPECT_LE(MaxDifference(image->pixels, rgb), 6);
}

TEST(JpegTest, GreyAndCmykDecodeToRgb) {
  const std::vector<uint8_t> grey = Gradient(32, 32, 1);
  absl::StatusOr<RgbImage> image =
      DecodeJpeg(Compress(grey, 32, 32, TJPF_GRAY, TJSAMP_GRAY), 0, "grey.jpg");
  ASSERT_TRUE(image.ok()) << image.status();
  std::vector<uint8_t> expected;
  for (uint8_t g : grey) expected.insert(expected.end(), {g, g, g});
  EXPECT_LE(MaxDifference(image->pixels, expected), 4);
  // Adobe's inverted CMYK: R = C·K/255.
  const std::vector<uint8_t> cmyk = Gradient(32, 32, 4);
  image = DecodeJpeg(Compress(cmyk, 32, 32, TJPF_CMYK, TJSAMP_444), 0, "cmyk.jpg");
  ASSERT_TRUE(image.ok()) << image.status();
  expected.clear();
  for (size_t i = 0; i < cmyk.size(); i += 4) {
    for (int c = 0; c < 3; ++c) expected.push_back(static_cast<uint8_t>(cmyk[i + c] * cmyk[i + 3] / 255));
  }
  EXPECT_LE(MaxDifference(image->pixels, expected), 6);
}

TEST(JpegTest, ScaledDecodingKeepsTheShorterSideAtLeastWhatIsAsked) {
  const std::string jpeg = Compress(Gradient(500, 376, 3), 500, 376, TJPF_RGB, TJSAMP_420, 90);
  absl::StatusOr<RgbImage> image = DecodeJpeg(jpeg, 0, "big.jpg");
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->width, 500);
  image = DecodeJpeg(jpeg, 100, "big.jpg");  // 376/2 = 188 >= 100, 376/4 = 94 < 100
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->width, 250);
  EXPECT_EQ(image->height, 188);
  image = DecodeJpeg(jpeg, 40, "big.jpg");  // 376/8 = 47
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->height, 47);
  image = DecodeJpeg(jpeg, 400, "big.jpg");  // never scaled up, nor down past the image
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->height, 376);
}

TEST(JpegTest, EncodedGreyAndColourDecodeToTheirPixels) {
  for (const int channels : {1, 3}) {
    SCOPED_TRACE(channels);
    const std::vector<uint8_t> pixels = Gradient(40, 24, channels);
    absl::StatusOr<std::string> jpeg = EncodeJpeg(pixels.data(), 40, 24, channels, 100);
    ASSERT_TRUE(jpeg.ok()) << jpeg.status();
    absl::StatusOr<RgbImage> image = DecodeJpeg(*jpeg, 0, "encoded.jpg");
    ASSERT_TRUE(image.ok()) << image.status();
    ASSERT_EQ(image->width, 40);
    ASSERT_EQ(image->height, 24);
    for (int i = 0; i < 40 * 24; ++i) {
      for (int c = 0; c < 3; ++c) {
        const int want = pixels[i * channels + (channels == 1 ? 0 : c)];
        ASSERT_NEAR(image->pixels[i * 3 + c], want, 2) << i << " " << c;
      }
    }
  }
  const std::vector<uint8_t> two(40 * 24 * 2);
  EXPECT_FALSE(EncodeJpeg(two.data(), 40, 24, 2, 90).ok());
}

TEST(JpegTest, AHeaderOfNoPixelsIsDamage) {
  const std::vector<uint8_t> pixels = Gradient(16, 16, 3);
  const std::string good = *EncodeJpeg(pixels.data(), 16, 16, 3, 90);
  std::string jpeg = good;
  const size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  jpeg.replace(sof + 5, 4, std::string(4, '\0'));  // height and width
  const absl::Status zero = DecodeJpeg(jpeg, 0, "zero.jpg").status();
  EXPECT_FALSE(zero.ok());
  EXPECT_TRUE(absl::StrContains(zero.message(), "zero.jpg")) << zero;
  // The thread's decoder reads the next one as if nothing had happened.
  EXPECT_TRUE(DecodeJpeg(good, 0, "good.jpg").ok());
}

TEST(JpegTest, DamageAndOtherFormatsAreNamed) {
  const std::string jpeg = Compress(Gradient(512, 512, 3), 512, 512, TJPF_RGB, TJSAMP_420);
  absl::StatusOr<RgbImage> image = DecodeJpeg(jpeg.substr(0, jpeg.size() / 2), 0, "cut.jpg");
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::StrContains(image.status().message(), "cut.jpg: a damaged JPEG (512x512"))
      << image.status();
  image = DecodeJpeg(std::string("\x89PNG\r\n\x1a\n....", 12), 0, "photo.png");
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::StrContains(image.status().message(), "photo.png: a PNG")) << image.status();
  image = DecodeJpeg("hello", 0, "x.jpg");
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::StrContains(image.status().message(), "x.jpg: not a JPEG")) << image.status();
  // A header claiming 60000x60000 pixels is refused before any is decoded.
  std::string huge = jpeg;
  const size_t sof = huge.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t i : {sof + 5, sof + 7}) huge.replace(i, 2, "\xea\x60");
  image = DecodeJpeg(huge, 0, "huge.jpg");
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::StrContains(image.status().message(), "60000x60000, over 64 megapixels"))
      << image.status();
  image = DecodeJpeg(jpeg.substr(0, 40), 0, "head.jpg");
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(absl::StrContains(image.status().message(), "head.jpg: ")) << image.status();
}

}  // namespace
}  // namespace cohort
