#include "trainer/io/mapped_file.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
}

TEST(MappedFileTest, MapsTheFilesBytes) {
  const std::string path = TempPath("bytes");
  std::ofstream(path, std::ios::binary) << std::string("record\0bytes", 12);
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), path);
  const auto bytes = (*file)->bytes();
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), std::string("record\0bytes", 12));
}

TEST(MappedFileTest, AnEmptyFileHasNoBytes) {
  const std::string path = TempPath("empty");
  std::ofstream(path, std::ios::binary).flush();
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->bytes().empty());
}

TEST(MappedFileTest, AMissingFileOrAFolderIsNamed) {
  auto missing = MappedFile::Open(TempPath("missing"));
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  auto folder = MappedFile::Open(TempPath(""));
  EXPECT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace cohort
