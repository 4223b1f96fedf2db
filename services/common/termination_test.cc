#include "services/common/termination.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(TerminationTest, TheAnswerRunsOnceOnItsOwnThreadWithTheSignal) {
  std::promise<std::pair<int, std::thread::id>> got;
  OnTerminationSignal([&](int signo) { got.set_value({signo, std::this_thread::get_id()}); });
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);  // blocked here: only the watcher takes it
  std::future<std::pair<int, std::thread::id>> answer = got.get_future();
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto [signo, thread] = answer.get();
  EXPECT_EQ(signo, SIGTERM);
  EXPECT_NE(thread, std::this_thread::get_id());
  EXPECT_STREQ(TerminationSignalName(signo), "SIGTERM");
}

TEST(TerminationDeathTest, ASecondSignalEndsTheProcessWhileTheFirstAnswerRuns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        OnTerminationSignal([](int) { std::this_thread::sleep_for(std::chrono::hours(1)); });
        kill(getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        kill(getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        _exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGINT), "");
}

}  // namespace
}  // namespace cohort
