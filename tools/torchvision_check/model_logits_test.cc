#include "tools/torchvision_check/model_logits.h"

#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/io/model_file.h"
#include "trainer/io/safetensors.h"
#include "trainer/models/models.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

Tensor RandomImages(const Shape& shape, uint64_t seed) {
  Tensor t(shape);
  Rng rng(seed);
  for (float& v : t.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  return t;
}

// A trained model's file, read back alone, gives the trained model's evaluation logits: the
// same architecture, classes, weights and running statistics.
TEST(ModelLogitsTest, AnExportedModelGivesItsOwnLogitsBack) {
  OnednnBackend dnn;
  auto trained = *BuildModel("googlenet", &dnn, Shape{3, 32, 32}, 7);
  trained->InitParameters(4);
  // Running statistics away from (0, 1), as training leaves them.
  for (const StateTensor& s : trained->state()) {
    for (float& v : s.value->span<float>()) v += 0.25f;
  }
  const std::string path = ::testing::TempDir() + "/googlenet.safetensors";
  ASSERT_TRUE(SaveModel(*trained, {}, path).ok());
  const Tensor images = RandomImages(Shape{3, 3, 32, 32}, 5);
  const Tensor& want = trained->Forward(Mode::kEval, images);

  auto loaded = LoadExportedModel(path, &dnn);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->name(), "googlenet");
  EXPECT_EQ((*loaded)->input_shape(), (Shape{3, 32, 32}));
  EXPECT_EQ((*loaded)->num_classes(), 7);
  const Tensor& got = (*loaded)->Forward(Mode::kEval, images);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
}

TEST(ModelLogitsTest, FilesThatAreNotExportsAreRefusedByName) {
  const std::string path = ::testing::TempDir() + "/plain.safetensors";
  Tensor bias(Shape{3});
  bias.SetZero();
  ASSERT_TRUE(WriteSafetensors(path, {{"fc.bias", &bias}}, {}).ok());
  OnednnBackend dnn;
  const absl::Status no_metadata = LoadExportedModel(path, &dnn).status();
  EXPECT_TRUE(absl::StrContains(no_metadata.message(), "not a Cohort export")) << no_metadata;
  EXPECT_TRUE(absl::StrContains(no_metadata.message(), path)) << no_metadata;
  ASSERT_TRUE(WriteSafetensors(path, {{"fc.bias", &bias}},
                               {{"model", "googlenet"}, {"input_shape", "3x32x32"}})
                  .ok());
  const absl::Status bad_shape = LoadExportedModel(path, &dnn).status();
  EXPECT_TRUE(absl::StrContains(bad_shape.message(), "input_shape \"3x32x32\"")) << bad_shape;
  ASSERT_TRUE(WriteSafetensors(path, {{"fc.bias", &bias}},
                               {{"model", "googlenet"}, {"input_shape", "[3,32,32]"}})
                  .ok());
  // The model is built, but the file lacks its tensors.
  const absl::Status missing = LoadExportedModel(path, &dnn).status();
  EXPECT_TRUE(absl::StrContains(missing.message(), "has no tensor conv1.conv.weight")) << missing;
}

TEST(ModelLogitsTest, RawFloatsRoundTripAsWholeImages) {
  const std::string path = ::testing::TempDir() + "/images.f32";
  const Tensor images = RandomImages(Shape{2, 3, 4, 5}, 6);
  ASSERT_TRUE(WriteRawFloats(path, images).ok());
  auto read = ReadRawImages(path, Shape{3, 4, 5});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->shape(), images.shape());
  EXPECT_EQ(std::memcmp(read->raw(), images.raw(), images.nbytes()), 0);
  const absl::Status partial = ReadRawImages(path, Shape{3, 4, 7}).status();
  EXPECT_TRUE(absl::StrContains(partial.message(), "not a whole number of (3, 4, 7)")) << partial;
  EXPECT_EQ(ReadRawImages(path + ".missing", Shape{1}).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort
