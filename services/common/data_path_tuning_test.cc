#include "services/common/data_path_tuning.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

pid_t ThisThread() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void RunAsDefault(pid_t tid) {
  const sched_param priority{};
  ASSERT_EQ(sched_setscheduler(tid, SCHED_OTHER, &priority), 0);
}

// A thread that tells its id and waits until released.
class WaitingThread {
 public:
  WaitingThread()
      : thread_([this] {
          tid_ = ThisThread();
          started_.Notify();
          release_.WaitForNotification();
        }) {
    started_.WaitForNotification();
  }
  ~WaitingThread() {
    release_.Notify();
    thread_.join();
  }
  pid_t tid() const { return tid_; }

 private:
  absl::Notification started_, release_;
  pid_t tid_ = 0;
  std::thread thread_;
};

// Each test starts and ends with this thread under the default policy.
class SchedulingPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(RunAsDefault(0)); }
  void TearDown() override { RunAsDefault(0); }
};

TEST_F(SchedulingPolicyTest, RunAsBatchSetsEveryThreadAndTheThreadsStartedLater) {
  WaitingThread before;
  ASSERT_EQ(sched_getscheduler(before.tid()), SCHED_OTHER);

  ASSERT_TRUE(RunAsBatch().ok());
  EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(before.tid()), SCHED_BATCH);
  WaitingThread after;
  EXPECT_EQ(sched_getscheduler(after.tid()), SCHED_BATCH);
}

// (TuneForDataPath also turns off this test process's lock-order checks, as it does a shard's.)
TEST_F(SchedulingPolicyTest, TuneForDataPathRunsAsBatchUnlessTheEnvironmentSaysNot) {
  ASSERT_EQ(setenv("COHORT_SCHED_BATCH", "0", 1), 0);
  TuneForDataPath();
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);

  ASSERT_EQ(unsetenv("COHORT_SCHED_BATCH"), 0);
  TuneForDataPath();
  EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
}

}  // namespace
}  // namespace cohort
