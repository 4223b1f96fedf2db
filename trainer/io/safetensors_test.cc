#include "trainer/io/safetensors.h"

#include <cstring>
#include <fstream>

#include "gtest/gtest.h"
#include "trainer/io/model_file.h"
#include "trainer/models/models.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file assembled by hand: 8-byte length, header, data.
std::string Assemble(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

TEST(SafetensorsTest, ExactBytesOfASmallFile) {
  Tensor t(Shape{2}, DType::kF32);
  t.data<float>()[0] = 1.0f;
  t.data<float>()[1] = -2.0f;
  const std::string path = TempPath("small.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"w", &t}}, {{"model", "m"}}).ok());
  const std::string header =
      R"({"__metadata__":{"model":"m"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string data(8, '\0');
  std::memcpy(data.data(), t.raw(), 8);
  EXPECT_EQ(ReadAll(path), Assemble(padded, data));
}

TEST(SafetensorsTest, ModelRoundTripInModelOrder) {
  OnednnBackend dnn;
  auto a = *BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  auto b = *BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  a->InitParameters(1);
  b->InitParameters(2);
  const std::string path = TempPath("lenet.safetensors");
  ASSERT_TRUE(SaveModel(*a, {{"input_mean", "0.286"}}, path).ok());

  auto file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->names.size(), a->parameters().size());
  for (size_t i = 0; i < file->names.size(); ++i) EXPECT_EQ(file->names[i], a->parameters()[i]->name);
  EXPECT_EQ(file->metadata.at("model"), "lenet");
  EXPECT_EQ(file->metadata.at("input_shape"), "[1,28,28]");
  EXPECT_EQ(file->metadata.at("input_mean"), "0.286");
  EXPECT_EQ(file->tensors[0].shape(), (Shape{6, 1, 5, 5}));  // OIHW

  ASSERT_TRUE(LoadModel(path, b.get()).ok());
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    const Tensor& x = a->parameters()[i]->value;
    const Tensor& y = b->parameters()[i]->value;
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << a->parameters()[i]->name;
  }

  auto mlp = *BuildModel("mlp", &dnn, Shape{1, 28, 28}, 10);
  auto wrong = LoadModel(path, mlp.get());
  EXPECT_EQ(wrong.message(), path + " holds a lenet model, not mlp");
}

// Batch-norm running statistics travel with the parameters, after each layer's weight and bias.
TEST(SafetensorsTest, ResnetRoundTripKeepsRunningStatistics) {
  OnednnBackend dnn;
  auto a = *BuildModel("resnet20", &dnn, Shape{1, 32, 32}, 10);
  auto b = *BuildModel("resnet20", &dnn, Shape{1, 32, 32}, 10);
  a->InitParameters(1);
  float v = 0.5f;
  for (const StateTensor& s : a->state())
    for (float& x : s.value->span<float>()) x = (v += 0.25f);
  const std::string path = TempPath("resnet20.safetensors");
  ASSERT_TRUE(SaveModel(*a, {}, path).ok());
  auto file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->names[3], "bn1.running_mean");
  EXPECT_EQ(file->names[4], "bn1.running_var");
  ASSERT_TRUE(LoadModel(path, b.get()).ok());
  const auto want = a->ExportedTensors(), got = b->ExportedTensors();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::memcmp(want[i].value->raw(), got[i].value->raw(), want[i].value->nbytes()), 0)
        << want[i].name;
  }
}

void ExpectRejected(const std::string& name, const std::string& bytes, const std::string& fragment) {
  const std::string path = TempPath(name);
  WriteAll(path, bytes);
  auto f = ReadSafetensors(path);
  ASSERT_FALSE(f.ok()) << name;
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status();
}

TEST(SafetensorsTest, StrictReading) {
  const std::string eight(8, 'x');
  ExpectRejected("short", "abc", "shorter than the 8-byte header length");
  std::string huge = Assemble("{}", "");
  huge[0] = 100;
  ExpectRejected("huge", huge, "header length 100 exceeds the file");
  ExpectRejected("notjson", Assemble("{not json", ""), "not a JSON object");
  ExpectRejected("dtype", Assemble(R"({"a":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})", eight),
                 "tensor a: dtype \"I8\" is not F32, BF16 or F16");
  ExpectRejected("size", Assemble(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
                 "tensor a: holds 8 bytes, shape (3) of F32 needs 12");
  ExpectRejected(
      "gap",
      Assemble(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
               eight + "xxxx"),
      "tensor b: begins at 8, the previous tensor ends at 4");
  ExpectRejected(
      "overlap",
      Assemble(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               eight),
      "tensor b: begins at 4");
  ExpectRejected("trailing", Assemble(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight),
                 "4 bytes after the last tensor");
  ExpectRejected("past", Assemble(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
                 "ends at 16, past the data");
  ExpectRejected("negative", Assemble(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", eight),
                 "non-negative integer");
  ExpectRejected("metadata", Assemble(R"({"__metadata__":{"model":3}})", ""), "metadata model is not a string");
}

}  // namespace
}  // namespace cohort
