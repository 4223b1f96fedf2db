// The heartbeat and the grace period against a fake scheduler (control streams the test
// drives) and a fake clock: no sockets, and time moves only when the test moves it.

#include "services/membership/membership_core.h"

#include <atomic>
#include <deque>
#include <memory>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/fake_clock.h"

namespace cohort {
namespace {

constexpr absl::Duration kGrace = absl::Seconds(3);

// The scheduler's side of every control stream the member opens.
class FakeScheduler {
 public:
  enum class Mode {
    kAnswering,  // answers each heartbeat with RUNNING; closes its side after the member's
    kSilent,     // takes heartbeats and says nothing
    kBroken,     // every stream is broken at once
  };

  void set_mode(Mode mode) {
    absl::MutexLock lock(&mu_);
    mode_ = mode;
  }
  // Sends the job's end on the open stream.
  void End(v1::JobState state, const std::string& reason) {
    absl::MutexLock lock(&mu_);
    v1::ControlMessage m;
    m.set_state(state);
    m.set_reason(reason);
    inbox_.push_back(m);
  }
  int streams() const {
    absl::MutexLock lock(&mu_);
    return streams_;
  }
  int heartbeats() const {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  v1::Heartbeat last_heartbeat() const {
    absl::MutexLock lock(&mu_);
    return last_;
  }
  bool writes_done() const {
    absl::MutexLock lock(&mu_);
    return writes_done_;
  }
  // Blocks (real time) until the scheduler has taken n heartbeats in all.
  bool WaitForHeartbeats(int n) {
    absl::MutexLock lock(&mu_);
    const auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return heartbeats_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }

  MembershipCore::StreamOpener Opener() {
    return [this] { return std::make_unique<Stream>(this); };
  }

 private:
  class Stream final : public ControlStream {
   public:
    explicit Stream(FakeScheduler* s) : s_(s) {
      absl::MutexLock lock(&s_->mu_);
      ++s_->streams_;
      broken_ = s_->mode_ == Mode::kBroken;
    }
    bool Read(v1::ControlMessage* message) override {
      absl::MutexLock lock(&s_->mu_);
      const auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !s_->inbox_.empty() || broken_ || closed_;
      };
      s_->mu_.Await(absl::Condition(&ready));
      if (s_->inbox_.empty()) return false;
      *message = s_->inbox_.front();
      s_->inbox_.pop_front();
      return true;
    }
    bool Write(const v1::Heartbeat& heartbeat) override {
      absl::MutexLock lock(&s_->mu_);
      if (broken_) return false;
      ++s_->heartbeats_;
      s_->last_ = heartbeat;
      if (s_->mode_ == Mode::kAnswering) {
        v1::ControlMessage m;
        m.set_state(v1::RUNNING);
        s_->inbox_.push_back(m);
      }
      return true;
    }
    void WritesDone() override {
      absl::MutexLock lock(&s_->mu_);
      s_->writes_done_ = true;
      if (s_->mode_ == Mode::kAnswering) closed_ = true;
    }
    void Cancel() override {
      absl::MutexLock lock(&s_->mu_);
      broken_ = true;
    }
    absl::Status Finish() override {
      absl::MutexLock lock(&s_->mu_);
      return broken_ ? absl::CancelledError("Cancelled") : absl::OkStatus();
    }

   private:
    FakeScheduler* const s_;
    bool broken_ = false;  // guarded by s_->mu_
    bool closed_ = false;  // guarded by s_->mu_
  };

  mutable absl::Mutex mu_;
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kAnswering;
  std::deque<v1::ControlMessage> inbox_ ABSL_GUARDED_BY(mu_);
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  v1::Heartbeat last_ ABSL_GUARDED_BY(mu_);
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
};

class MembershipCoreTest : public ::testing::Test {
 protected:
  void Start(MembershipCore::Rejoiner rejoin = nullptr) {
    MembershipTiming timing;
    timing.heartbeat_interval = absl::Milliseconds(1);  // real time between heartbeats
    timing.scheduler_grace = kGrace;                     // on the fake clock
    core_ = std::make_unique<MembershipCore>("worker 0", v1::WORKER, 0, "sched:1", timing,
                                             scheduler_.Opener(), &clock_, std::move(rejoin));
    core_->Start();
  }

  FakeScheduler scheduler_;
  FakeClock clock_;
  std::unique_ptr<MembershipCore> core_;
};

TEST_F(MembershipCoreTest, AnsweredHeartbeatsKeepTheMembershipAliveAsTimePasses) {
  Start();
  for (int i = 0; i < 20; ++i) {  // 20 s of fake time, 1 s at a time
    const int seen = scheduler_.heartbeats();
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(scheduler_.WaitForHeartbeats(seen + 3));
  }
  EXPECT_FALSE(core_->ended());
  EXPECT_EQ(scheduler_.streams(), 1);
  EXPECT_EQ(scheduler_.last_heartbeat().role(), v1::WORKER);
  EXPECT_EQ(scheduler_.last_heartbeat().rank(), 0);
}

TEST_F(MembershipCoreTest, ASchedulerThatStopsAnsweringIsLostAfterTheGracePeriod) {
  scheduler_.set_mode(FakeScheduler::Mode::kSilent);
  Start();
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(20));
  EXPECT_FALSE(core_->ended()) << "no fake time has passed";
  clock_.Advance(kGrace - absl::Milliseconds(100));
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(40));
  EXPECT_FALSE(core_->ended()) << "still within the grace period";
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(core_->WaitUntilEnded(absl::Seconds(10)));
  const absl::Status status = core_->end_status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(),
                                "worker 0 lost the scheduler at sched:1: no answer for 3.9s"))
      << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "no reconnect within 3s (--scheduler_grace)"))
      << status;
  const absl::Time before = absl::Now();
  core_->Stop();  // the heartbeat thread is gone already: nothing left waiting
  EXPECT_LT(absl::Now() - before, absl::Seconds(1));
}

TEST_F(MembershipCoreTest, ABrokenStreamIsReopenedWithinTheGracePeriod) {
  scheduler_.set_mode(FakeScheduler::Mode::kBroken);
  Start();
  while (scheduler_.streams() < 3) absl::SleepFor(absl::Milliseconds(1));
  scheduler_.set_mode(FakeScheduler::Mode::kAnswering);
  const int seen = scheduler_.heartbeats();
  clock_.Advance(kGrace / 2);
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(seen + 5));
  clock_.Advance(kGrace);  // answers keep coming: the grace restarts from each
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(seen + 10));
  EXPECT_FALSE(core_->ended());
}

// Before reopening a broken stream the member registers again (a restarted scheduler knows
// nobody); while that fails, no stream is opened, and past the grace the member says why.
TEST_F(MembershipCoreTest, AMemberRegistersAgainBeforeEachReconnect) {
  scheduler_.set_mode(FakeScheduler::Mode::kBroken);
  absl::Mutex mu;
  int rejoins = 0;
  bool refuse = false;
  Start([&] {
    absl::MutexLock lock(&mu);
    ++rejoins;
    return refuse ? absl::UnavailableError("connection refused") : absl::OkStatus();
  });
  while (scheduler_.streams() < 3) absl::SleepFor(absl::Milliseconds(1));
  {
    absl::MutexLock lock(&mu);
    EXPECT_GE(rejoins, scheduler_.streams() - 1);  // before every stream but the first
    refuse = true;
  }
  const int streams = scheduler_.streams();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_LE(scheduler_.streams(), streams + 1);  // one may have been opening
  clock_.Advance(kGrace + absl::Milliseconds(1));
  ASSERT_TRUE(core_->WaitUntilEnded(absl::Seconds(10)));
  EXPECT_TRUE(absl::StrContains(core_->end_status().message(), "connection refused"))
      << core_->end_status();
}

TEST_F(MembershipCoreTest, ReconnectsFailingPastTheGracePeriodEndTheJobForTheMember) {
  scheduler_.set_mode(FakeScheduler::Mode::kBroken);
  Start();
  while (scheduler_.streams() < 3) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_FALSE(core_->ended());
  clock_.Advance(kGrace + absl::Milliseconds(1));
  ASSERT_TRUE(core_->WaitUntilEnded(absl::Seconds(10)));
  // Whether the last try broke at once or found the grace spent first, the member says so.
  EXPECT_TRUE(absl::StrContains(core_->end_status().message(),
                                "worker 0 lost the scheduler at sched:1: "))
      << core_->end_status();
  EXPECT_TRUE(absl::StrContains(core_->end_status().message(), "no reconnect within 3s"))
      << core_->end_status();
}

TEST_F(MembershipCoreTest, TheSchedulersFailureReachesEveryListenerOnce) {
  Start();
  std::atomic<int> called{0}, removed_called{0};
  core_->OnEnd([&] { ++called; });
  const int removed = core_->OnEnd([&] { ++removed_called; });
  core_->RemoveEndListener(removed);
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(1));  // the stream is open
  scheduler_.End(v1::FAILED, "worker 1 (host h, pid 7) is dead");
  ASSERT_TRUE(core_->WaitUntilEnded(absl::Seconds(10)));
  EXPECT_EQ(core_->end_status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(core_->end_status().message(), "the job failed: worker 1 (host h, pid 7) is dead");
  core_->Stop();
  EXPECT_EQ(called, 1);
  EXPECT_EQ(removed_called, 0);
  int late = 0;
  core_->OnEnd([&] { ++late; });  // after the end: called at once
  EXPECT_EQ(late, 1);
}

TEST_F(MembershipCoreTest, DoneEndsTheJobWithOk) {
  Start();
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(1));
  scheduler_.End(v1::DONE, "");
  ASSERT_TRUE(core_->WaitUntilEnded(absl::Seconds(10)));
  EXPECT_TRUE(core_->end_status().ok());
}

TEST_F(MembershipCoreTest, StopClosesTheStreamCleanlyWithoutEndingTheJob) {
  Start();
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(3));
  core_->Stop();
  EXPECT_TRUE(scheduler_.writes_done());
  EXPECT_FALSE(core_->ended());
}

TEST_F(MembershipCoreTest, ProgressTravelsWithTheNextHeartbeats) {
  Start();
  v1::Progress progress;
  progress.set_step(42);
  progress.set_epoch(3);
  core_->SetProgress(progress);
  const int seen = scheduler_.heartbeats();
  ASSERT_TRUE(scheduler_.WaitForHeartbeats(seen + 2));
  EXPECT_EQ(scheduler_.last_heartbeat().progress().step(), 42);
  EXPECT_EQ(scheduler_.last_heartbeat().progress().epoch(), 3);
}

}  // namespace
}  // namespace cohort
