#include "trainer/data/dataset.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

ImageDataset TwoByTwo() {
  ImageDataset d;
  d.name = "tiny";
  d.sample_shape = Shape{2, 2, 2};  // two samples of two channels
  d.num_classes = 3;
  d.pixels = {1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18};
  d.labels = {2, 0};
  return d;
}

TEST(PadImagesTest, PadsEverySideWithZeros) {
  auto p = PadImages(TwoByTwo(), 4, 6);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->sample_shape, (Shape{2, 4, 6}));
  EXPECT_EQ(p->labels, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(p->num_classes, 3);
  const std::vector<uint8_t> plane_of_sample1_channel1 = {
      0, 0, 0,  0,  0, 0,  //
      0, 0, 15, 16, 0, 0,  //
      0, 0, 17, 18, 0, 0,  //
      0, 0, 0,  0,  0, 0,
  };
  ASSERT_EQ(p->pixels.size(), 2u * 2 * 4 * 6);
  EXPECT_EQ(std::vector<uint8_t>(p->pixels.begin() + 3 * 24, p->pixels.end()),
            plane_of_sample1_channel1);
  EXPECT_EQ(p->pixels[1 * 6 + 2], 1);  // sample 0, channel 0, (1, 2)
}

TEST(PadImagesTest, FashionMnistTo32AndSameSize) {
  ImageDataset d;
  d.sample_shape = Shape{1, 28, 28};
  d.pixels.assign(28 * 28, 7);
  d.labels = {1};
  auto p = PadImages(d, 32, 32);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->sample_shape, (Shape{1, 32, 32}));
  EXPECT_EQ(p->pixels[2 * 32 + 1], 0);
  EXPECT_EQ(p->pixels[2 * 32 + 2], 7);
  EXPECT_EQ(p->pixels[29 * 32 + 29], 7);
  EXPECT_EQ(p->pixels[29 * 32 + 30], 0);
  auto same = PadImages(TwoByTwo(), 2, 2);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->pixels, TwoByTwo().pixels);
}

TEST(PadImagesTest, UnevenOrNegativeIsAnError) {
  for (auto [h, w] : {std::pair<int64_t, int64_t>{3, 2}, {2, 5}, {0, 2}, {4, 1}}) {
    auto p = PadImages(TwoByTwo(), h, w);
    ASSERT_FALSE(p.ok()) << h << "x" << w;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("cannot pad the 2x2 images of tiny to"), std::string::npos)
        << p.status();
  }
}

TEST(DatasetTest, NamesListEveryForm) {
  EXPECT_EQ(DatasetNames(),
            (std::vector<std::string>{"cifar10", "fashion-mnist", "mnist", "synthetic-cifar10",
                                      "synthetic-imagenet", "synthetic:CxHxW:K"}));
  EXPECT_EQ(DefaultDataDir("cifar10"), "/usr/share/datasets/cifar10");
}

}  // namespace
}  // namespace cohort
