#include "services/common/deadline_timer.h"

#include <atomic>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(DeadlineTimerTest, FiresOnceByTheEarliestTimeAskedFor) {
  absl::Mutex mu;
  int fired = 0;
  absl::Time at;
  DeadlineTimer timer([&] {
    absl::MutexLock lock(&mu);
    ++fired;
    at = absl::Now();
  });
  const absl::Time start = absl::Now();
  timer.FireBy(start + absl::Seconds(30));
  timer.FireBy(start + absl::Milliseconds(20));  // the earlier one counts
  timer.FireBy(start + absl::Seconds(10));
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                      +[](int* n) { return *n > 0; }, &fired),
                                  absl::Seconds(5)));
  EXPECT_GE(at - start, absl::Milliseconds(20));
  EXPECT_LT(at - start, absl::Seconds(5));
  // The requests it served are gone: nothing more fires.
  EXPECT_FALSE(mu.AwaitWithTimeout(
      absl::Condition(+[](int* n) { return *n > 1; }, &fired), absl::Milliseconds(100)));
}

TEST(DeadlineTimerTest, StopsWithoutFiringWhatWasNotDue) {
  std::atomic<int> fired{0};
  {
    DeadlineTimer timer([&] { ++fired; });
    timer.FireBy(absl::Now() + absl::Hours(1));
  }  // destroyed at once, not in an hour
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
}  // namespace cohort
