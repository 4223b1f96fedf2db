#include "tools/launch/command_line.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::StatusOr<LauncherArgs> Split(std::vector<const char*> args) {
  return SplitLauncherArgs(static_cast<int>(args.size()), args.data());
}

TEST(SplitLauncherArgsTest, HostsAndLaunchPySpellings) {
  auto a = Split({"launch", "-H", "hosts.txt", "-H=a,b:2", "--sync-dst-dir", "/tmp/x", "--",
                  "-H", "y"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->flags, ElementsAre("launch", "--hosts=hosts.txt", "--hosts=a,b:2",
                                    "--sync_dst_dir", "/tmp/x"));
  EXPECT_THAT(a->worker_words, ElementsAre("-H", "y"));
}

TEST(SplitLauncherArgsTest, TranslatesShortFlagsInEverySpelling) {
  auto a = Split({"launch", "-n", "2", "-s=3", "-n4", "-s", "5"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->flags, ElementsAre("launch", "--num_workers=2", "--num_shards=3",
                                    "--num_workers=4", "--num_shards=5"));
  EXPECT_THAT(a->worker_words, IsEmpty());
}

TEST(SplitLauncherArgsTest, SplitsAtTheFirstBareDoubleDashAndLeavesTheRestAlone) {
  auto a = Split({"launch", "-n", "2", "--", "./train", "-n", "--batch-size=3", "--", "x"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->flags, ElementsAre("launch", "--num_workers=2"));
  EXPECT_THAT(a->worker_words, ElementsAre("./train", "-n", "--batch-size=3", "--", "x"));
}

TEST(SplitLauncherArgsTest, HyphensInNamesBecomeUnderscoresButValuesStay) {
  auto a = Split({"launch", "--job-id=my-job", "--num-workers", "2", "-worker-binary=a-b"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->flags,
              ElementsAre("launch", "--job_id=my-job", "--num_workers", "2", "-worker_binary=a-b"));
}

TEST(SplitLauncherArgsTest, SingleDashLongNamesAreNotShortFlags) {
  auto a = Split({"launch", "-num_workers=2", "-shard_binary=x"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->flags, ElementsAre("launch", "-num_workers=2", "-shard_binary=x"));
}

TEST(SplitLauncherArgsTest, ShortFlagWithoutValueIsAnError) {
  auto a = Split({"launch", "-s", "1", "-n"});
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("-n needs a value"));
}

TEST(SplitLauncherArgsTest, NothingAfterDoubleDashMeansNoWorkerWords) {
  auto a = Split({"launch", "-n", "1", "--"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->worker_words, IsEmpty());
}

}  // namespace
}  // namespace cohort::launch
