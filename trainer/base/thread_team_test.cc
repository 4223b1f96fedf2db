#include "trainer/base/thread_team.h"

#include <atomic>
#include <set>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(ThreadTeamTest, RunsEveryMemberOnItsOwnLongLivedThread) {
  std::vector<std::thread::id> setup_ids(3);
  ThreadTeam team(3, [&](int m) { setup_ids[m] = std::this_thread::get_id(); });
  ASSERT_EQ(team.size(), 3);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::thread::id> ids(3);
    std::vector<int> calls(3, 0);
    team.Run([&](int m) {
      ids[m] = std::this_thread::get_id();
      ++calls[m];
    });
    EXPECT_EQ(calls, std::vector<int>({1, 1, 1})) << "round " << round;
    EXPECT_EQ(ids, setup_ids) << "round " << round;  // the thread its setup ran on
  }
  EXPECT_EQ(std::set<std::thread::id>(setup_ids.begin(), setup_ids.end()).size(), 3u);
  EXPECT_EQ(setup_ids[0] == std::this_thread::get_id(), false);
}

TEST(ThreadTeamTest, RunReturnsOnlyWhenEveryMemberIsDone) {
  ThreadTeam team(2, nullptr);
  std::atomic<int> finished{0};
  for (int round = 0; round < 20; ++round) {
    team.Run([&](int m) {
      if (m == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      finished.fetch_add(1);
    });
    EXPECT_EQ(finished.load(), 2 * (round + 1));
  }
}

}  // namespace
}  // namespace cohort
