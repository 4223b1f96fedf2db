#include "services/common/cpu_list.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;

TEST(CpuListTest, FormatsAndParsesTheKernelsForm) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5}), "5");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_THAT(*ParseCpuList("0-3,8,10-11"), ElementsAre(0, 1, 2, 3, 8, 10, 11));
  EXPECT_THAT(*ParseCpuList("7"), ElementsAre(7));
  for (const char* bad : {"", "a", "3-1", "1,1", "2,0", "-1", "0-", "1-2-3", "99999"}) {
    const auto parsed = ParseCpuList(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("is not a CPU list"), std::string::npos);
  }
}

// A thread confined to one CPU runs there, and so do the threads it starts.
TEST(CpuListTest, AConfinedThreadAndTheThreadsItStartsStayOnItsCpus) {
  const std::vector<int> all = AllowedCpus();
  ASSERT_FALSE(all.empty());
  std::vector<int> mine, child;
  std::thread([&] {
    ASSERT_TRUE(ConfineToCpus({all.back()}).ok());
    mine = AllowedCpus();
    std::thread([&] { child = AllowedCpus(); }).join();
  }).join();
  EXPECT_THAT(mine, ElementsAre(all.back()));
  EXPECT_THAT(child, ElementsAre(all.back()));
  EXPECT_EQ(AllowedCpus(), all);  // this thread is left alone
  EXPECT_FALSE(ConfineToCpus({}).ok());
}

}  // namespace
}  // namespace cohort
