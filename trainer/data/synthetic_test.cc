#include "trainer/data/synthetic.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(SyntheticTest, FixedBySeed) {
  const ImageDataset a = MakeSyntheticDataset(Shape{3, 5, 7}, 4, 300, 9, "a");
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.sample_shape, (Shape{3, 5, 7}));
  EXPECT_EQ(a.num_classes, 4);
  EXPECT_EQ(a.size(), 300);
  ASSERT_EQ(a.pixels.size(), 300u * 105);
  const ImageDataset b = MakeSyntheticDataset(Shape{3, 5, 7}, 4, 300, 9, "b");
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
  const ImageDataset c = MakeSyntheticDataset(Shape{3, 5, 7}, 4, 300, 10, "c");
  EXPECT_NE(a.pixels, c.pixels);
  EXPECT_NE(a.labels, c.labels);
}

TEST(SyntheticTest, PixelsAndLabelsCoverTheirRanges) {
  const ImageDataset d = MakeSyntheticDataset(Shape{1, 16, 16}, 10, 1000, 1, "d");
  std::vector<int> per_class(10, 0);
  for (int32_t l : d.labels) {
    ASSERT_TRUE(l >= 0 && l < 10);
    ++per_class[l];
  }
  for (int c : per_class) EXPECT_GT(c, 60);  // 100 expected
  double sum = 0;
  std::vector<int> seen(256, 0);
  for (uint8_t p : d.pixels) {
    sum += p;
    ++seen[p];
  }
  EXPECT_NEAR(sum / d.pixels.size(), 127.5, 1.0);
  for (int v = 0; v < 256; ++v) EXPECT_GT(seen[v], 0) << v;
}

TEST(SyntheticTest, SizesFollowTheRule) {
  EXPECT_EQ(SyntheticTrainSize(Shape{3, 224, 224}), (256 << 20) / (3 * 224 * 224));  // 1783
  EXPECT_EQ(SyntheticTrainSize(Shape{3, 32, 32}), 50000);
  EXPECT_EQ(SyntheticTrainSize(Shape{3, 1024, 1024}), 256);
  auto d = LoadDataset("synthetic:1x4x4:3", "");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size(), 50000);
  EXPECT_EQ(d->test.size(), 6250);
  EXPECT_EQ(d->train.sample_shape, (Shape{1, 4, 4}));
  EXPECT_EQ(d->train.num_classes, 3);
  EXPECT_EQ(d->train.name, "synthetic:1x4x4:3 train");
  EXPECT_NE(d->train.pixels, std::vector<uint8_t>(d->train.pixels.size(), 0));
  auto again = LoadDataset("synthetic:1x4x4:3", "");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(d->train.pixels, again->train.pixels);
  EXPECT_EQ(d->test.labels, again->test.labels);
  EXPECT_NE(std::vector<uint8_t>(d->train.pixels.begin(), d->train.pixels.begin() + 1000),
            std::vector<uint8_t>(d->test.pixels.begin(), d->test.pixels.begin() + 1000));
}

TEST(SyntheticTest, AliasesAndAnyShape) {
  auto imagenet = ParseSyntheticName("synthetic-imagenet");
  ASSERT_TRUE(imagenet.ok());
  EXPECT_EQ(imagenet->sample_shape, (Shape{3, 224, 224}));
  EXPECT_EQ(imagenet->num_classes, 1000);
  auto cifar = ParseSyntheticName("synthetic-cifar10");
  ASSERT_TRUE(cifar.ok());
  EXPECT_EQ(cifar->sample_shape, (Shape{3, 32, 32}));
  EXPECT_EQ(cifar->num_classes, 10);
  auto any = ParseSyntheticName("synthetic:1x28x20:21841");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->sample_shape, (Shape{1, 28, 20}));
  EXPECT_EQ(any->num_classes, 21841);
}

TEST(SyntheticTest, BadNamesSayTheExpectedForm) {
  for (const char* name :
       {"synthetic", "synthetic-mnist", "synthetic:3x224:10", "synthetic:3x224x224",
        "synthetic:3x224x224:10:1", "synthetic:0x2x2:10", "synthetic:3x224x224:0",
        "synthetic:axbxc:3", "synthetic:3x2048x2048:10", "synthetic:1x2x3x4:5",
        "synthetic:4194304x4194304x4194304:2"}) {
    auto d = LoadDataset(name, "");
    ASSERT_FALSE(d.ok()) << name;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << name;
    const std::string msg(d.status().message());
    EXPECT_EQ(msg.rfind(std::string("--dataset=") + name + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find("expected synthetic:CxHxW:K"), std::string::npos) << msg;
  }
  EXPECT_NE(LoadDataset("synthetic:3x2048x2048:10", "").status().message().find("4 MiB"),
            std::string::npos);
}

}  // namespace
}  // namespace cohort
