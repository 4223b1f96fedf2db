#include "tools/launch/programs.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_tmp_dir.h"

namespace cohort::launch {
namespace {

using ::testing::HasSubstr;

// Creates an executable file (and its folders) under the test's temporary folder.
std::string MakeExecutable(const std::string& relative) {
  std::string path = TmpDir();
  size_t start = 0;
  for (size_t slash; (slash = relative.find('/', start)) != std::string::npos; start = slash + 1) {
    mkdir((path + "/" + relative.substr(0, slash)).c_str(), 0755);
  }
  path += "/" + relative;
  std::ofstream(path) << "#!/bin/sh\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(FindRoleBinaryTest, TakesTheFirstRunfilesFolderThatHasIt) {
  const std::string path = MakeExecutable("b.runfiles/cohort/services/shard/shard");
  const std::string dir = TmpDir();
  auto found = FindRoleBinary(Role::kShard, "", {dir + "/a.runfiles", dir + "/b.runfiles"}, "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, path);
}

TEST(FindRoleBinaryTest, MissingBinarySaysWhereItLookedAndWhatToDo) {
  auto found = FindRoleBinary(Role::kShard, "", {"/nowhere/x.runfiles"}, "");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(std::string(found.status().message()),
            "cannot find the shard binary at /nowhere/x.runfiles/cohort/services/shard/shard; "
            "build //services:shard or pass --shard_binary");
}

TEST(FindRoleBinaryTest, OverrideIsRelativeToTheUsersDirectory) {
  const std::string path = MakeExecutable("bin/my_scheduler");
  auto found = FindRoleBinary(Role::kScheduler, "bin/my_scheduler", {}, TmpDir());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, path);
  auto missing = FindRoleBinary(Role::kWorker, "bin/none", {}, "/u");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("--worker_binary, /u/bin/none, is not an executable file"));
}

TEST(FindRoleBinaryTest, TheGpuWorkerSitsBesideTheWorker) {
  const std::string path = MakeExecutable("g.runfiles/cohort/services/worker/worker_gpu");
  auto found = FindRoleBinary(Role::kWorker, "", {TmpDir() + "/g.runfiles"}, "", "worker_gpu");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, path);
  auto missing = FindRoleBinary(Role::kWorker, "", {"/nowhere/x.runfiles"}, "", "worker_gpu");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(std::string(missing.status().message()),
            "cannot find the worker binary at "
            "/nowhere/x.runfiles/cohort/services/worker/worker_gpu; build "
            "//services:worker_gpu (on a machine with the CUDA toolkit) or pass --worker_binary");
}

TEST(WorkerBinaryNameTest, GpuDevicesPickTheGpuWorker) {
  for (const std::vector<std::string>& words : std::vector<std::vector<std::string>>{
           {"--devices", "gpu:0", "--precision", "bf16"},
           {"--model=lenet", "--devices=gpu:0,1"},
           {"-devices=gpu"},
           {"--gpus", "0,1"},
           {"--gpus=0"},
           {"--devices=1,2"},
           {"--devices=cpu", "--devices=gpu:0"}}) {
    EXPECT_EQ(WorkerBinaryName(words), "worker_gpu") << words[0];
  }
  for (const std::vector<std::string>& words : std::vector<std::vector<std::string>>{
           {},
           {"--model=lenet"},
           {"--devices", "cpu:2"},
           {"--devices=cpu"},
           {"--devices=gpu:0", "--devices=cpu"},
           {"--output=gpu", "--data_dir", "0"},
           {"--model=lenet", "--", "--devices=gpu:0"}}) {
    EXPECT_EQ(WorkerBinaryName(words), "worker") << (words.empty() ? "(none)" : words[0]);
  }
}

TEST(IsUserProgramTest, FlagsOrNothingMeanTheWorkerBinary) {
  EXPECT_FALSE(IsUserProgram({}));
  EXPECT_FALSE(IsUserProgram({"--model=lenet", "./x"}));
  EXPECT_TRUE(IsUserProgram({"./my_trainer", "--model=lenet"}));
  EXPECT_TRUE(IsUserProgram({"python3"}));
}

TEST(FindProgramTest, LooksUpNamesInPath) {
  const std::string path = MakeExecutable("path2/my_tool");
  const std::string dir = TmpDir();
  auto found = FindProgram("my_tool", dir + "/path1:" + dir + "/path2", "/elsewhere");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, path);
}

TEST(FindProgramTest, TakesRelativePathsFromTheUsersDirectory) {
  const std::string path = MakeExecutable("proj/train.sh");
  auto found = FindProgram("./proj/train.sh", "/bin", TmpDir());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, TmpDir() + "/./proj/train.sh");
}

TEST(FindProgramTest, MissingProgramIsAClearError) {
  auto found = FindProgram("no_such_tool_xyz", "/bin:/usr/bin", "");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(std::string(found.status().message()),
              HasSubstr("cannot find the program 'no_such_tool_xyz' in PATH (/bin:/usr/bin)"));
  auto relative = FindProgram("./nope.sh", "/bin", "/home/u");
  ASSERT_FALSE(relative.ok());
  EXPECT_THAT(std::string(relative.status().message()),
              HasSubstr("/home/u/./nope.sh is not an executable file"));
}

}  // namespace
}  // namespace cohort::launch
