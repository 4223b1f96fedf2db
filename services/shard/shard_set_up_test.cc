// Calls that come before a shard is set up wait for it, and a shard that leaves lets them go.

#include "services/shard/shard_set_up.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// Waits for the set-up on a thread of its own; its status once it returned.
class Waiter {
 public:
  explicit Waiter(const ShardSetUp* set_up)
      : thread_([this, set_up] {
          status_ = set_up->Wait("init");
          returned_.Notify();
        }) {}
  ~Waiter() { thread_.join(); }
  bool Returned(absl::Duration within) { return returned_.WaitForNotificationWithTimeout(within); }
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
  absl::Notification returned_;
  std::thread thread_;
};

TEST(ShardSetUpTest, ACallWaitsUntilTheShardIsSetUp) {
  ShardSetUp set_up;
  Waiter waiter(&set_up);
  EXPECT_FALSE(waiter.Returned(absl::Milliseconds(200)));
  set_up.Done();
  ASSERT_TRUE(waiter.Returned(absl::Seconds(5)));
  EXPECT_TRUE(waiter.status().ok()) << waiter.status();
  EXPECT_TRUE(set_up.Wait("later").ok());
}

TEST(ShardSetUpTest, AShardThatLeavesLetsWaitingAndLaterCallsGo) {
  ShardSetUp set_up;
  Waiter waiter(&set_up);
  EXPECT_FALSE(waiter.Returned(absl::Milliseconds(200)));
  set_up.Leave();
  ASSERT_TRUE(waiter.Returned(absl::Seconds(5)));
  EXPECT_EQ(waiter.status().code(), absl::StatusCode::kCancelled) << waiter.status();
  set_up.Done();  // a shard leaving as it finished its set-up: leaving wins
  EXPECT_EQ(set_up.Wait("later").code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace cohort
