#include "trainer/data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"
#include "trainer/data/dataset.h"

namespace cohort {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<uint8_t> IdxBytes(uint32_t magic, std::vector<uint32_t> dims, size_t data_bytes) {
  std::vector<uint8_t> b;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<uint8_t>(i % 7));
  return b;
}

void WritePlain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

void WriteGzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(IdxTest, ReadsGzipAndPlain) {
  const auto bytes = IdxBytes(0x803, {3, 4, 5}, 60);
  WriteGzip(TempPath("ok.gz"), bytes);
  WritePlain(TempPath("ok"), bytes);
  for (const char* name : {"ok.gz", "ok"}) {
    auto a = ReadIdx(TempPath(name), 3);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{3, 4, 5}));
    ASSERT_EQ(a->data.size(), 60u);
    EXPECT_EQ(a->data[8], 8 % 7);
  }
}

void ExpectError(const std::string& path, int rank, const std::string& fragment) {
  auto a = ReadIdx(path, rank);
  ASSERT_FALSE(a.ok()) << path;
  const std::string msg(a.status().message());
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
}

TEST(IdxTest, MissingFile) { ExpectError(TempPath("nope.gz"), 3, "cannot open"); }

TEST(IdxTest, ADirectoryWhereTheFileShouldBeIsNamedSo) {
  const std::string dir = TempPath("images-idx3-ubyte.gz");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ExpectError(dir, 3, "is a directory or another non-file; it should be an IDX file");
}

TEST(IdxTest, WrongMagic) {
  WriteGzip(TempPath("magic.gz"), IdxBytes(0x801, {60}, 60));
  ExpectError(TempPath("magic.gz"), 3, "magic number 0x00000801");
  WriteGzip(TempPath("float.gz"), IdxBytes(0xD03, {3, 4, 5}, 60));  // 0x0D: float data
  ExpectError(TempPath("float.gz"), 3, "is not an IDX file of unsigned bytes");
}

TEST(IdxTest, TruncatedHeaderAndData) {
  WriteGzip(TempPath("short_header.gz"), {0, 0, 8, 3, 0, 0});
  ExpectError(TempPath("short_header.gz"), 3, "truncated IDX header");
  WriteGzip(TempPath("short_data.gz"), IdxBytes(0x803, {3, 4, 5}, 59));
  ExpectError(TempPath("short_data.gz"), 3, "promises 60 data bytes, the file holds 59");
  WriteGzip(TempPath("long_data.gz"), IdxBytes(0x803, {3, 4, 5}, 61));
  ExpectError(TempPath("long_data.gz"), 3, "1 bytes after the data");
}

TEST(IdxTest, TruncatedAndCorruptGzipStreams) {
  std::vector<uint8_t> big = IdxBytes(0x803, {100, 28, 28}, 100 * 28 * 28);
  WriteGzip(TempPath("full.gz"), big);
  std::vector<uint8_t> gz = ReadAll(TempPath("full.gz"));
  ASSERT_GT(gz.size(), 100u);
  WritePlain(TempPath("cut.gz"), std::vector<uint8_t>(gz.begin(), gz.begin() + gz.size() / 2));
  ExpectError(TempPath("cut.gz"), 3, "corrupt or truncated gzip data");
  std::vector<uint8_t> bad = gz;
  bad[bad.size() - 6] ^= 0xff;  // inside the CRC-32 trailer
  WritePlain(TempPath("crc.gz"), bad);
  ExpectError(TempPath("crc.gz"), 3, "corrupt or truncated gzip data");
}

TEST(DatasetTest, CountMismatchAndBadLabels) {
  const std::string dir = TempPath("");
  WriteGzip(dir + "/m-images-idx3-ubyte.gz", IdxBytes(0x803, {5, 2, 2}, 20));
  WriteGzip(dir + "/m-labels-idx1-ubyte.gz", IdxBytes(0x801, {4}, 4));
  auto d = LoadIdxImages(dir, "m", 10, "m");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("holds 5 images but"), std::string::npos) << d.status();
  EXPECT_NE(d.status().message().find("holds 4 labels"), std::string::npos);

  std::vector<uint8_t> labels = IdxBytes(0x801, {5}, 0);
  for (uint8_t l : {1, 2, 12, 3, 4}) labels.push_back(l);
  WriteGzip(dir + "/m-labels-idx1-ubyte.gz", labels);
  d = LoadIdxImages(dir, "m", 10, "m");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("label 12 of sample 2 is outside [0, 10)"), std::string::npos)
      << d.status();
}

TEST(DatasetTest, UnknownDatasetAndMissingDirectory) {
  auto d = LoadDataset("imagenet-22k", "");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "unknown dataset 'imagenet-22k'; known datasets: cifar10, fashion-mnist, mnist, "
            "synthetic-cifar10, synthetic-imagenet, synthetic:CxHxW:K");
  d = LoadDataset("mnist", "/nonexistent/mnist");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("/nonexistent/mnist does not exist"), std::string::npos);
}

TEST(DatasetTest, GatherNormalises) {
  ImageDataset d;
  d.sample_shape = Shape{1, 1, 2};
  d.num_classes = 3;
  d.pixels = {0, 255, 51, 51, 255, 0};
  d.labels = {0, 1, 2};
  const Normalization norm = ComputeNormalization(d);
  // Pixels/255: 0, 1, .2, .2, 1, 0 → mean 0.4, variance 2.08/6 − 0.4².
  EXPECT_NEAR(norm.mean, 0.4, 1e-6);
  EXPECT_NEAR(norm.std, std::sqrt(2.08 / 6 - 0.16), 1e-6);
  Tensor x, y(Shape{0}, DType::kI32);
  const std::vector<int64_t> idx{2, 0};
  GatherBatch(d, idx, norm, &x, &y);
  EXPECT_EQ(x.shape(), (Shape{2, 1, 1, 2}));
  EXPECT_NEAR(x.data<float>()[0], (1 - 0.4) / std::sqrt(2.08 / 6 - 0.16), 1e-5);  // sample 2, pixel 0
  EXPECT_NEAR(x.data<float>()[1], (0 - 0.4) / std::sqrt(2.08 / 6 - 0.16), 1e-5);
  EXPECT_NEAR(x.data<float>()[2], (0 - 0.4) / std::sqrt(2.08 / 6 - 0.16), 1e-5);  // sample 0, pixel 0
  EXPECT_EQ(y.data<int32_t>()[0], 2);
  EXPECT_EQ(y.data<int32_t>()[1], 0);
}

TEST(DatasetTest, FashionMnistAsInstalled) {
  auto d = LoadDataset("fashion-mnist", "");
  if (!d.ok() && d.status().code() == absl::StatusCode::kNotFound) {
    GTEST_SKIP() << "Fashion-MNIST not installed: " << d.status();
  }
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size(), 60000);
  EXPECT_EQ(d->test.size(), 10000);
  EXPECT_EQ(d->train.sample_shape, (Shape{1, 28, 28}));
  std::vector<int> per_class(10, 0);
  for (int32_t l : d->test.labels) ++per_class[l];
  for (int c : per_class) EXPECT_EQ(c, 1000);
  const Normalization norm = ComputeNormalization(d->train);
  EXPECT_NEAR(norm.mean, 0.2860, 1e-3);  // the published Fashion-MNIST statistics
  EXPECT_NEAR(norm.std, 0.3530, 1e-3);
}

}  // namespace
}  // namespace cohort
