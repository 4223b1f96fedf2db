#include "trainer/data/encoded_source.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/data/jpeg.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// A picture that differs from image to image, so samples cannot be mistaken for each other.
std::string Picture(int width, int height, int seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<uint8_t>((i * (seed + 3) / 7 + seed * 31) % 256);
  }
  return *EncodeJpeg(pixels.data(), width, height, 3, 90);
}

class EncodedSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    for (int i = 0; i < 24; ++i) {
      const fs::path path = dir_ / absl::StrCat("class", i % 3) / absl::StrCat("img", 10 + i, ".jpg");
      fs::create_directories(path.parent_path());
      std::ofstream(path, std::ios::binary) << Picture(40 + 3 * i, 30 + 2 * i, i);
    }
  }

  std::unique_ptr<EncodedImages> Images() const {
    auto images = OpenEncodedImages(absl::StrCat("imagefolder:", dir_.string()), {});
    EXPECT_TRUE(images.ok()) << images.status();
    return *std::move(images);
  }

  static EncodedSourceOptions Options(bool train, int threads) {
    EncodedSourceOptions o;
    o.transform.train_size = o.transform.eval_size = 16;
    o.transform.eval_resize = 20;
    o.train = train;
    o.threads = threads;
    return o;
  }

  fs::path dir_;
};

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Each sample is what the transformer makes of its image on its own, whatever the threads.
TEST_F(EncodedSourceTest, BatchesAreTheTransformersSamplesInOrderOnAnyNumberOfThreads) {
  const std::vector<int64_t> indices = {5, 0, 23, 7, 7, 12, 1};
  const EpochKeys keys{9, 2};
  std::unique_ptr<EncodedImages> reference_images = Images();
  ImageTransformer transformer(Options(true, 1).transform);
  std::vector<float> want(indices.size() * 3 * 16 * 16);
  std::vector<int32_t> want_labels;
  for (size_t i = 0; i < indices.size(); ++i) {
    std::string bytes;
    absl::StatusOr<int64_t> label = reference_images->Read(indices[i], &bytes);
    ASSERT_TRUE(label.ok()) << label.status();
    want_labels.push_back(static_cast<int32_t>(*label));
    ASSERT_TRUE(transformer
                    .Train(bytes, keys.seed, keys.epoch, indices[i], "x",
                           want.data() + i * 3 * 16 * 16)
                    .ok());
  }
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    EncodedSource source(Images(), Options(true, threads), nullptr);
    EXPECT_EQ(source.size(), 24);
    EXPECT_EQ(source.num_classes(), 3);
    EXPECT_EQ(source.sample_shape(), (Shape{3, 16, 16}));
    Tensor images, labels(Shape{0}, DType::kI32);
    ASSERT_TRUE(source.Gather(indices, &keys, &images, &labels).ok());
    ASSERT_EQ(images.shape(), (Shape{7, 3, 16, 16}));
    EXPECT_EQ(std::memcmp(images.raw(), want.data(), want.size() * sizeof(float)), 0);
    EXPECT_EQ(std::vector<int32_t>(labels.data<int32_t>(), labels.data<int32_t>() + 7),
              want_labels);
    // The buffers are kept from batch to batch.
    const void* buffer = images.raw();
    ASSERT_TRUE(source.Gather(indices, &keys, &images, &labels).ok());
    EXPECT_EQ(images.raw(), buffer);
  }
}

TEST_F(EncodedSourceTest, EvaluationSamplesAreCentreCropsWithoutChance) {
  EncodedSource source(Images(), Options(false, 2), nullptr);
  std::vector<int64_t> all(24);
  std::iota(all.begin(), all.end(), 0);
  Tensor a, b, labels(Shape{0}, DType::kI32);
  ASSERT_TRUE(source.Gather(all, nullptr, &a, &labels).ok());
  ASSERT_TRUE(source.Gather(all, nullptr, &b, &labels).ok());
  EXPECT_TRUE(SameBits(a, b));
  std::string bytes;
  std::unique_ptr<EncodedImages> images = Images();
  ASSERT_TRUE(images->Read(4, &bytes).ok());
  std::vector<float> want(3 * 16 * 16);
  ImageTransformer transformer(Options(false, 1).transform);
  ASSERT_TRUE(transformer.Eval(bytes, "x", want.data()).ok());
  EXPECT_EQ(std::memcmp(a.data<float>() + 4 * want.size(), want.data(), want.size() * 4), 0);
  const ChannelNormalization norm = source.normalization();
  EXPECT_EQ(norm.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(norm.std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
}

TEST_F(EncodedSourceTest, ADamagedImageFailsTheBatchNamingItOrIsSkippedWhenAsked) {
  // The image at index 4 (class0/img22.jpg: class 0 holds img10, 13, 16, 19, 22, ...) cut short.
  const fs::path cut = dir_ / "class0" / "img22.jpg";
  const std::string whole = Picture(40 + 3 * 12, 30 + 2 * 12, 12);
  std::ofstream(cut, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() / 2);
  const std::vector<int64_t> indices = {3, 4, 5};
  const EpochKeys keys{1, 0};
  Tensor images, labels(Shape{0}, DType::kI32);
  {
    EncodedSource source(Images(), Options(true, 2), nullptr);
    const absl::Status failed = source.Gather(indices, &keys, &images, &labels);
    EXPECT_TRUE(absl::IsDataLoss(failed)) << failed;
    EXPECT_NE(failed.message().find(cut.string()), std::string::npos) << failed;
  }
  EncodedSourceOptions skipping = Options(true, 2);
  skipping.skip_corrupt = true;
  std::ostringstream log;
  EncodedSource source(Images(), skipping, &log);
  ASSERT_TRUE(source.Gather(indices, &keys, &images, &labels).ok());
  EXPECT_EQ(source.skipped(), 1);
  EXPECT_NE(log.str().find("skipped a damaged sample (1 so far"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find(cut.string()), std::string::npos) << log.str();
  // Its place holds the next image, cut as the damaged one's draw says.
  std::string bytes;
  ASSERT_TRUE(Images()->Read(5, &bytes).ok());
  std::vector<float> want(3 * 16 * 16);
  ImageTransformer transformer(skipping.transform);
  ASSERT_TRUE(transformer.Train(bytes, keys.seed, keys.epoch, 4, "x", want.data()).ok());
  EXPECT_EQ(std::memcmp(images.data<float>() + want.size(), want.data(), want.size() * 4), 0);
  EXPECT_EQ(labels.data<int32_t>()[1], labels.data<int32_t>()[2]);
}

TEST_F(EncodedSourceTest, ALimitKeepsTheFirstImages) {
  EncodedSourceOptions o = Options(true, 1);
  o.limit = 10;
  EncodedSource source(Images(), o, nullptr);
  EXPECT_EQ(source.size(), 10);
  o.limit = 100;
  EXPECT_EQ(EncodedSource(Images(), o, nullptr).size(), 24);
}

}  // namespace
}  // namespace cohort
