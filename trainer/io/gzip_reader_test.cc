#include "trainer/io/gzip_reader.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string Path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

// The whole file through the reader, in chunks of 1,000 bytes.
absl::StatusOr<std::string> ReadAll(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GzipReader>> reader = GzipReader::Open(path, "a test file");
  if (!reader.ok()) return reader.status();
  std::string all;
  char chunk[1000];
  while (true) {
    absl::StatusOr<size_t> n = (*reader)->Read(absl::MakeSpan(chunk));
    if (!n.ok()) return n.status();
    if (*n == 0) return all;
    all.append(chunk, *n);
  }
}

TEST(GzipReaderTest, ReadsPlainAndCompressedFilesAlike) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i * 7919) + "\n";
  std::ofstream(Path("plain.txt"), std::ios::binary) << text;
  gzFile f = gzopen(Path("text.gz").c_str(), "wb");
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(f);
  EXPECT_EQ(*ReadAll(Path("plain.txt")), text);
  EXPECT_EQ(*ReadAll(Path("text.gz")), text);
  // Cut in half: what came before is read, then the loss is said.
  const auto size = std::filesystem::file_size(Path("text.gz"));
  std::filesystem::copy_file(Path("text.gz"), Path("cut.gz"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(Path("cut.gz"), size / 2);
  const absl::Status cut = ReadAll(Path("cut.gz")).status();
  EXPECT_EQ(cut.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(cut.message().find(Path("cut.gz") + ": corrupt or truncated gzip data ("), 0u) << cut;
}

TEST(GzipReaderTest, SaysWhatAPathThatIsNoFileShouldBe) {
  EXPECT_EQ(GzipReader::Open(::testing::TempDir(), "a test file").status().message(),
            ::testing::TempDir() + " is a directory or another non-file; it should be a test file");
  EXPECT_EQ(GzipReader::Open(Path("nowhere"), "a test file").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort
