// A file's bytes come back whole (every byte value, past the first zero); a missing one is
// named.

#include "trainer/io/whole_file.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(WholeFileTest, ReadsEveryByteBack) {
  std::string bytes;
  for (int i = 0; i < 3 * 256; ++i) bytes.push_back(static_cast<char>(i % 256));
  const std::string path = std::string(testing::TempDir()) + "/whole_file_test.bin";
  std::ofstream(path, std::ios::binary) << bytes;
  const absl::StatusOr<std::string> read = ReadWholeFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
  std::remove(path.c_str());
}

TEST(WholeFileTest, AMissingFileIsNamed) {
  const absl::StatusOr<std::string> read = ReadWholeFile("/nonexistent/cohort/file");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(read.status().message(), "/nonexistent/cohort/file"));
}

}  // namespace
}  // namespace cohort
