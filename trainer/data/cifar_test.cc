#include "trainer/data/cifar.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "trainer/data/dataset.h"

namespace cohort {
namespace {

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Pixel j of record r of a file.
uint8_t Pixel(int file, int r, int j) { return static_cast<uint8_t>(file * 31 + r * 7 + j); }

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A batch file of records labelled `labels`, its pixels from Pixel(file, ...).
void WriteBatch(const std::string& path, int file, const std::vector<int>& labels) {
  std::string bytes;
  for (int r = 0; r < static_cast<int>(labels.size()); ++r) {
    bytes.push_back(static_cast<char>(labels[r]));
    for (int j = 0; j < 3072; ++j) bytes.push_back(static_cast<char>(Pixel(file, r, j)));
  }
  WriteBytes(path, bytes);
}

// Five training files of two records and a test file of three.
void WriteAll(const std::string& dir) {
  for (int f = 1; f <= 5; ++f) {
    WriteBatch(dir + "/data_batch_" + std::to_string(f) + ".bin", f, {(2 * f) % 10, (2 * f + 1) % 10});
  }
  WriteBatch(dir + "/test_batch.bin", 0, {9, 0, 4});
}

TEST(CifarTest, ReadsTrainAndTestInFileOrder) {
  const std::string dir = TempDir("cifar_ok");
  WriteAll(dir);
  auto d = LoadCifar10(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size(), 10);
  EXPECT_EQ(d->test.size(), 3);
  EXPECT_EQ(d->train.sample_shape, (Shape{3, 32, 32}));
  EXPECT_EQ(d->train.num_classes, 10);
  EXPECT_EQ(d->train.labels, (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8, 9, 0, 1}));
  EXPECT_EQ(d->test.labels, (std::vector<int32_t>{9, 0, 4}));
  ASSERT_EQ(d->train.pixels.size(), 10u * 3072);
  // Sample 5 is record 1 of data_batch_3.bin; pixel (c=1, y=2, x=5) is byte 1024 + 2·32 + 5.
  EXPECT_EQ(d->train.pixels[5 * 3072 + 1024 + 69], Pixel(3, 1, 1024 + 69));
  EXPECT_EQ(d->test.pixels[2 * 3072 + 3071], Pixel(0, 2, 3071));
}

TEST(CifarTest, AcceptsTheUnpackedSubdirectoryAndTheDatasetName) {
  const std::string dir = TempDir("cifar_parent");
  std::filesystem::create_directories(dir + "/cifar-10-batches-bin");
  WriteAll(dir + "/cifar-10-batches-bin");
  for (const std::string& d : {dir, dir + "/cifar-10-batches-bin"}) {
    auto data = LoadDataset("cifar10", d);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(data->train.size(), 10);
    EXPECT_EQ(data->test.size(), 3);
  }
}

void ExpectError(const std::string& dir, absl::StatusCode code,
                 const std::vector<std::string>& fragments) {
  auto d = LoadCifar10(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), code) << d.status();
  for (const std::string& f : fragments) {
    EXPECT_NE(d.status().message().find(f), std::string::npos) << d.status() << "\nlacks: " << f;
  }
}

TEST(CifarTest, MissingFileSaysWhichAndHowToGetIt) {
  const std::string dir = TempDir("cifar_missing");
  WriteAll(dir);
  std::filesystem::remove(dir + "/data_batch_4.bin");
  ExpectError(dir, absl::StatusCode::kNotFound,
              {dir + "/data_batch_4.bin", "download the CIFAR-10 binary version", "--data_dir"});
  auto d = LoadDataset("cifar10", dir + "/nonexistent");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("download the CIFAR-10 binary version"), std::string::npos)
      << d.status();
}

TEST(CifarTest, EmptyFile) {
  const std::string dir = TempDir("cifar_empty");
  WriteAll(dir);
  WriteBytes(dir + "/test_batch.bin", "");
  ExpectError(dir, absl::StatusCode::kDataLoss, {dir + "/test_batch.bin is empty"});
}

TEST(CifarTest, SizeNotAWholeNumberOfRecords) {
  const std::string dir = TempDir("cifar_size");
  WriteAll(dir);
  std::ifstream in(dir + "/data_batch_2.bin", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  WriteBytes(dir + "/data_batch_2.bin", bytes.substr(0, bytes.size() - 10));
  ExpectError(dir, absl::StatusCode::kDataLoss,
              {dir + "/data_batch_2.bin: size 6136 bytes", "3073-byte", "1 records and 3063 bytes over"});
}

TEST(CifarTest, LabelAboveNine) {
  const std::string dir = TempDir("cifar_label");
  WriteAll(dir);
  WriteBatch(dir + "/data_batch_5.bin", 5, {3, 10});
  ExpectError(dir, absl::StatusCode::kInvalidArgument,
              {dir + "/data_batch_5.bin: label 10 of record 1 (byte offset 3073)"});
}

TEST(CifarTest, AsInstalled) {
  auto d = LoadDataset("cifar10", "");
  if (!d.ok() && d.status().code() == absl::StatusCode::kNotFound) {
    GTEST_SKIP() << "CIFAR-10 not installed: " << d.status();
  }
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size(), 50000);
  EXPECT_EQ(d->test.size(), 10000);
  std::vector<int> per_class(10, 0);
  for (int32_t l : d->test.labels) ++per_class[l];
  for (int c : per_class) EXPECT_EQ(c, 1000);
}

}  // namespace
}  // namespace cohort
