#include "services/common/durable_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string TmpPath(const std::string& name) { return TmpDir() + "/" + name; }

// A fresh, empty folder of the test's own.
std::string Folder() {
  const std::string folder =
      TmpDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(folder);
  fs::create_directories(folder);
  return folder;
}

TEST(DurableFileTest, BytesReadBackAsWritten) {
  const std::string path = Folder() + "/parts";
  const std::string bytes("a\0b\xff\n", 5);
  ASSERT_TRUE(WriteFileDurably(path, bytes).ok());
  EXPECT_EQ(Contents(path), bytes);
}

TEST(DurableFileTest, ReplacesTheFileAndLeavesNoTemporary) {
  const std::string folder = Folder();
  const std::string path = folder + "/file";
  ASSERT_TRUE(WriteFileDurably(path, "first").ok());
  ASSERT_TRUE(WriteFileDurably(path, "second").ok());
  EXPECT_EQ(Contents(path), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 1);
}

TEST(DurableFileTest, AMissingFolderIsAnErrorNamingThePath) {
  const std::string path = Folder() + "/no/such/folder/file";
  const absl::Status s = WriteFileDurably(path, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), path)) << s;
}

TEST(WriteFileAtomicallyTest, ReplacesTheFileAndNamesAMissingFolder) {
  const std::string path = TmpPath("targets.json");
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  std::ifstream f(path);
  std::string text;
  std::getline(f, text);
  EXPECT_EQ(text, "two");
  const absl::Status s = WriteFileAtomically(TmpPath("no/such/dir/t.json"), "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir"), std::string::npos) << s;
}

TEST(WriteSecretFileTest, OnlyItsOwnerCanReadItEvenOverAnOpenLeftover) {
  const std::string path = TmpDir() + "/secret";
  // A temporary file left by an earlier run, open to everyone.
  const std::string leftover = absl::StrCat(path, ".tmp.", getpid());
  ASSERT_TRUE(WriteFileAtomically(leftover, "old").ok());
  ASSERT_EQ(chmod(leftover.c_str(), 0666), 0);
  ASSERT_TRUE(WriteSecretFile(path, "token\n").ok());
  struct stat file {};
  ASSERT_EQ(stat(path.c_str(), &file), 0);
  EXPECT_EQ(file.st_mode & 0777, 0600u);
  EXPECT_EQ(Contents(path), "token\n");
}

}  // namespace
}  // namespace cohort
