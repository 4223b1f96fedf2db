#include "trainer/data/image_export.h"

#include <filesystem>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/data/encoded_images.h"
#include "trainer/data/jpeg.h"
#include "trainer/data/synthetic.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// Smooth pictures (random pixels are JPEG's worst case), 12 of 3 classes.
ImageDataset Smooth(int64_t channels) {
  ImageDataset d = MakeSyntheticDataset(Shape{channels, 16, 16}, 3, 12, 5, "smooth");
  for (int64_t i = 0; i < d.size(); ++i) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t p = 0; p < 256; ++p) {
        d.pixels[(i * channels + c) * 256 + p] = static_cast<uint8_t>(20 + 8 * i + 30 * c + p / 2);
      }
    }
  }
  return d;
}

TEST(ImageExportTest, FolderAndListReadBackAsTheSamplesWithinJpegsLoss) {
  for (const int64_t channels : {1, 3}) {
    SCOPED_TRACE(channels);
    const ImageDataset d = Smooth(channels);
    const fs::path dir = fs::path(testing::TempDir()) / absl::StrCat("export", channels) / "train";
    std::ostringstream progress;
    ASSERT_TRUE(WriteJpegFolder(d, dir.string() + "/", 100, 0, progress).ok());
    EXPECT_NE(progress.str().find("12 of 12 images"), std::string::npos) << progress.str();
    EXPECT_TRUE(fs::exists(dir / "2" / "11.jpg"));
    EXPECT_TRUE(fs::exists(dir / "0" / "00.jpg") || fs::exists(dir / "1" / "00.jpg") ||
                fs::exists(dir / "2" / "00.jpg"));

    auto listed = OpenEncodedImages(absl::StrCat("imagefolder:", dir.string(), ".lst"), {});
    ASSERT_TRUE(listed.ok()) << listed.status();
    ASSERT_EQ((*listed)->size(), 12);
    for (int64_t i = 0; i < 12; ++i) {
      std::string bytes;
      absl::StatusOr<int64_t> label = (*listed)->Read(i, &bytes);
      ASSERT_TRUE(label.ok()) << label.status();
      EXPECT_EQ(*label, d.labels[i]);  // in sample order
      absl::StatusOr<RgbImage> image = DecodeJpeg(bytes, 0, "x");
      ASSERT_TRUE(image.ok()) << image.status();
      for (int64_t p = 0; p < 256; ++p) {
        for (int64_t c = 0; c < 3; ++c) {
          const int want = d.pixels[(i * channels + (channels == 1 ? 0 : c)) * 256 + p];
          ASSERT_NEAR(image->pixels[p * 3 + c], want, 3) << i << " " << p << " " << c;
        }
      }
    }
    auto folder = OpenEncodedImages(absl::StrCat("imagefolder:", dir.string()), {});
    ASSERT_TRUE(folder.ok()) << folder.status();
    EXPECT_EQ((*folder)->size(), 12);
    EXPECT_EQ((*folder)->num_classes(), 3);
  }
}

TEST(ImageExportTest, ALimitAndImagesJpegCannotHold) {
  const ImageDataset d = Smooth(1);
  const fs::path dir = fs::path(testing::TempDir()) / "limited";
  std::ostringstream progress;
  ASSERT_TRUE(WriteJpegFolder(d, dir.string(), 90, 5, progress).ok());
  auto listed = OpenEncodedImages(absl::StrCat("imagefolder:", dir.string(), ".lst"), {});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ((*listed)->size(), 5);
  const ImageDataset two = MakeSyntheticDataset(Shape{2, 4, 4}, 2, 4, 1, "two");
  const absl::Status refused = WriteJpegFolder(two, dir.string() + "2", 90, 0, progress);
  EXPECT_NE(refused.message().find("2 channels"), std::string::npos) << refused;
}

}  // namespace
}  // namespace cohort
