#include "tools/launch/supervisor.h"

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int kKilled = SIGKILL;  // waitpid statuses
constexpr int kTerminated = SIGTERM;
int Exited(int code) { return code << 8; }

// A process table without processes: members end when a test says so, or when stopped unless
// they hang on SIGTERM (then only SIGKILL ends them).
class FakeProcessTable : public ProcessTable {
 public:
  int Add(Role role, int rank, bool hangs_on_stop = false) {
    MemberStatus m;
    m.role = role;
    m.rank = rank;
    m.name = role == Role::kScheduler ? "scheduler" : absl::StrCat(RoleName(role), " ", rank);
    m.description = absl::StrCat(m.name, " (pid ", 100 + members_.size(), ")");
    members_.push_back(m);
    hangs_.push_back(hangs_on_stop);
    return static_cast<int>(members_.size()) - 1;
  }
  void End(int member, int wait_status) { members_[member].wait_status = wait_status; }

  std::vector<MemberStatus> Members() const override { return members_; }
  void Stop(int member) override {
    stopped.push_back(member);
    if (!hangs_[member]) End(member, kTerminated);
  }
  void Kill(int member) override {
    killed.push_back(member);
    End(member, kKilled);
  }

  std::vector<int> stopped;
  std::vector<int> killed;

 private:
  std::vector<MemberStatus> members_;
  std::vector<bool> hangs_;
};

class SupervisorTest : public ::testing::Test {
 protected:
  // A local job of 1 scheduler, 1 shard and 2 workers that started at t0.
  void StartJob(RestartRules rules = {}, SupervisorOptions options = {}) {
    options.job_id = "job-t";
    options.num_workers = 2;
    options.scheduler_port_file = "/scratch/scheduler.port";
    rules.num_workers = 2;
    supervisor_ = std::make_unique<Supervisor>(
        options, RestartPolicy(rules), table_,
        [this](absl::string_view m) { said_.emplace_back(m); });
    scheduler_ = table_.Add(Role::kScheduler, 0);
    supervisor_->Start(t0_);
    shard_ = table_.Add(Role::kShard, 0, /*hangs_on_stop=*/true);
    worker0_ = table_.Add(Role::kWorker, 0);
    worker1_ = table_.Add(Role::kWorker, 1);
    supervisor_->Run("127.0.0.1:9000");
  }
  void End(int member, int wait_status, absl::Duration at) {
    table_.End(member, wait_status);
    supervisor_->OnEnd(member, t0_ + at);
  }

  FakeProcessTable table_;
  std::unique_ptr<Supervisor> supervisor_;
  std::vector<std::string> said_;
  const absl::Time t0_ = absl::FromUnixSeconds(1000);
  int scheduler_ = 0, shard_ = 0, worker0_ = 0, worker1_ = 0;
};

TEST_F(SupervisorTest, AJobWhoseWorkersFinishEndsWhenTheOthersDo) {
  StartJob();
  End(worker0_, 0, absl::Seconds(1));
  EXPECT_EQ(supervisor_->deadline(), std::nullopt);
  End(worker1_, 0, absl::Seconds(2));
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(12));  // linger 0 + 10 s
  End(scheduler_, 0, absl::Seconds(3));
  End(shard_, 0, absl::Seconds(3));
  EXPECT_EQ(supervisor_->Finish(), 0);
  EXPECT_THAT(said_, ElementsAre("job job-t finished"));
  EXPECT_THAT(table_.stopped, IsEmpty());
}

TEST_F(SupervisorTest, AShardDyingAfterTheJobWasDoneLeavesItsResult) {
  RestartRules rules;
  rules.restart_failed_shards = true;
  rules.checkpoint_dir = "/ckpt";
  bool done = false;
  SupervisorOptions options;
  options.job_done = [&done] { return done; };
  StartJob(rules, options);
  done = true;  // the scheduler journalled DONE; the workers are still exiting
  End(shard_, kKilled, absl::Seconds(1));
  EXPECT_EQ(said_.back(), "shard 0 (pid 101) was killed by signal 9 (Killed) after the job was "
                          "DONE; its result stands");
  EXPECT_THAT(supervisor_->TakeRestarts().shards, IsEmpty());
  EXPECT_TRUE(supervisor_->running());
  End(worker0_, 0, absl::Seconds(1));
  End(worker1_, 0, absl::Seconds(1));
  End(scheduler_, 0, absl::Seconds(2));
  EXPECT_EQ(supervisor_->Finish(), 0);
  EXPECT_EQ(said_.back(), "job job-t finished");
}

TEST_F(SupervisorTest, AWorkerFailingAfterTheJobWasDoneStillFailsIt) {
  SupervisorOptions options;
  options.job_done = [] { return true; };
  StartJob({}, options);
  End(worker0_, Exited(1), absl::Seconds(1));
  EXPECT_EQ(said_.back(), "worker 0 (pid 102) exited with status 1");
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(4));
}

TEST_F(SupervisorTest, AMemberThatHangsOnStopIsKilledAfterTheGrace) {
  StartJob();
  End(worker1_, Exited(1), absl::Seconds(1));
  EXPECT_EQ(said_.back(), "worker 1 (pid 103) exited with status 1");
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(4));  // linger 0 + 3 s

  supervisor_->Tick(t0_ + absl::Seconds(3));  // not yet
  EXPECT_THAT(table_.stopped, IsEmpty());
  supervisor_->Tick(t0_ + absl::Seconds(4));
  EXPECT_EQ(said_.back(),
            "scheduler (pid 100), shard 0 (pid 101), worker 0 (pid 102) still running 3s after "
            "worker 1 failed; sending SIGTERM");
  EXPECT_THAT(table_.stopped, ElementsAre(scheduler_, shard_, worker0_));
  EXPECT_THAT(table_.killed, IsEmpty());
  // The scheduler and worker 0 ended on SIGTERM; the shard hangs.
  supervisor_->OnEnd(scheduler_, t0_ + absl::Seconds(4));
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(6));  // SIGTERM + 2 s
  supervisor_->Tick(t0_ + absl::Seconds(6));
  EXPECT_EQ(said_.back(), "shard 0 (pid 101) still running after SIGTERM; sending SIGKILL");
  EXPECT_THAT(table_.killed, ElementsAre(shard_));
  EXPECT_EQ(supervisor_->deadline(), std::nullopt);
  EXPECT_EQ(supervisor_->Finish(), 1);
  EXPECT_EQ(said_.back(), "job job-t failed (exit status 1)");
}

// The scheduler's journal says why the job failed: the launcher's last line says the same,
// unless the scheduler recorded its end only once the launcher stopped it (the line above it
// names the member that failed).
TEST_F(SupervisorTest, TheLastLineSaysWhyTheSchedulerFailedTheJob) {
  SupervisorOptions options;
  options.failure_reason = [] { return std::string("worker 1 (host a, pid 7) failed: boom"); };
  StartJob({}, options);
  End(worker1_, Exited(1), absl::Seconds(1));
  EXPECT_EQ(supervisor_->Finish(), 1);
  EXPECT_EQ(said_.back(),
            "job job-t failed (exit status 1): worker 1 (host a, pid 7) failed: boom");
}

TEST_F(SupervisorTest, AVerdictTheSchedulerRecordedOnlyOnceStoppedIsNotRepeated) {
  SupervisorOptions options;
  std::string journal;  // nothing yet: worker 1 failed before it joined
  options.failure_reason = [&journal] { return journal; };
  StartJob({}, options);
  End(worker1_, Exited(1), absl::Seconds(1));
  supervisor_->Tick(t0_ + absl::Seconds(4));  // SIGTERM to the others
  journal = "the scheduler was stopped by SIGTERM";
  EXPECT_EQ(supervisor_->Finish(), 1);
  EXPECT_EQ(said_.back(), "job job-t failed (exit status 1)");
}

TEST_F(SupervisorTest, RemoteMembersGetLongerToStop) {
  SupervisorOptions options;
  options.remote = true;
  options.linger_s = 5;
  StartJob({}, options);
  End(worker0_, Exited(2), absl::Seconds(0));
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(8));  // linger 5 + 3 s
  supervisor_->Tick(t0_ + absl::Seconds(8));
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(12));  // + 4 s
  supervisor_->Tick(t0_ + absl::Seconds(12));
  EXPECT_THAT(table_.killed, ElementsAre(shard_));
  EXPECT_EQ(supervisor_->Finish(), 2);
}

TEST_F(SupervisorTest, ADeadShardRestartsUntilTheLimitThenTheJobFails) {
  RestartRules rules;
  rules.restart_failed_shards = true;
  rules.checkpoint_dir = "/ckpt";
  StartJob(rules);
  int shard = shard_;
  for (int i = 1; i <= kMaxShardRestarts; ++i) {
    End(shard, kKilled, absl::Seconds(i));
    EXPECT_EQ(said_.back(), absl::StrCat("shard 0 (pid ", 100 + shard,
                                         ") was killed by signal 9 (Killed); restarting it from "
                                         "the newest complete checkpoint in /ckpt (restart ",
                                         i, " of at most 3)"));
    const Restarts restarts = supervisor_->TakeRestarts();
    EXPECT_FALSE(restarts.scheduler);
    EXPECT_THAT(restarts.shards, ElementsAre(0));
    EXPECT_THAT(supervisor_->TakeRestarts().shards, IsEmpty());  // taken once
    EXPECT_TRUE(supervisor_->running());
    shard = table_.Add(Role::kShard, 0);
  }
  End(shard, kKilled, absl::Seconds(10));
  EXPECT_EQ(said_.back(),
            absl::StrCat("shard 0 (pid ", 100 + shard,
                         ") was killed by signal 9 (Killed); it was restarted 3 times already, "
                         "the most --restart_failed_shards allows: the job fails"));
  EXPECT_THAT(supervisor_->TakeRestarts().shards, IsEmpty());
  EXPECT_FALSE(supervisor_->running());
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(13));
  supervisor_->Tick(t0_ + absl::Seconds(13));
  EXPECT_THAT(table_.stopped, ElementsAre(scheduler_, worker0_, worker1_));
  EXPECT_EQ(supervisor_->Finish(), 128 + SIGKILL);
}

TEST_F(SupervisorTest, RestartsChosenBeforeAFailureAreDropped) {
  RestartRules rules;
  rules.restart_scheduler = true;
  StartJob(rules);
  End(scheduler_, kKilled, absl::Seconds(1));
  EXPECT_EQ(said_.back(), "scheduler (pid 100) was killed by signal 9 (Killed); restarting it "
                          "at 127.0.0.1:9000 (restart 1 of at most 3)");
  End(worker0_, Exited(3), absl::Seconds(1));  // the same turn
  EXPECT_FALSE(supervisor_->TakeRestarts().scheduler);
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(4));
}

TEST_F(SupervisorTest, TheSchedulerFailingGivesTheMembersItsGrace) {
  StartJob();
  End(scheduler_, Exited(1), absl::Seconds(1));
  EXPECT_EQ(said_.back(), "scheduler (pid 100) exited with status 1");
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(7));  // 6 s
}

TEST_F(SupervisorTest, InterruptStopsAtOnceAndASecondKills) {
  StartJob();
  supervisor_->OnSignal(SIGCHLD, t0_);  // not for the supervisor
  EXPECT_THAT(table_.stopped, IsEmpty());
  supervisor_->OnSignal(SIGINT, t0_);
  EXPECT_EQ(said_.back(), "interrupted; stopping 4 processes");
  EXPECT_THAT(table_.stopped, ElementsAre(scheduler_, shard_, worker0_, worker1_));
  EXPECT_EQ(supervisor_->deadline(), t0_ + absl::Seconds(5));
  supervisor_->OnSignal(SIGINT, t0_ + absl::Seconds(1));
  EXPECT_EQ(said_.back(), "interrupted again; killing 1 process");
  EXPECT_THAT(table_.killed, ElementsAre(shard_));
  EXPECT_EQ(supervisor_->Finish(), 128 + SIGINT);
  EXPECT_EQ(said_.back(), "job job-t interrupted");
}

TEST(SupervisorStartTest, ASchedulerThatNeverListensStopsTheJob) {
  FakeProcessTable table;
  std::vector<std::string> said;
  SupervisorOptions options;
  options.job_id = "job-s";
  options.start_timeout = absl::Seconds(30);
  options.scheduler_port_file = "/scratch/scheduler.port";
  Supervisor supervisor(options, RestartPolicy({}), table,
                        [&](absl::string_view m) { said.emplace_back(m); });
  const int scheduler = table.Add(Role::kScheduler, 0, /*hangs_on_stop=*/true);
  const absl::Time t0 = absl::FromUnixSeconds(50);
  supervisor.Start(t0);
  EXPECT_TRUE(supervisor.starting());
  supervisor.Tick(t0 + absl::Seconds(30));
  EXPECT_EQ(said.back(),
            "the scheduler did not write its port file /scratch/scheduler.port within 30s; "
            "stopping the job (see the scheduler's output above)");
  EXPECT_THAT(table.stopped, ElementsAre(scheduler));
  supervisor.Tick(t0 + absl::Seconds(32));
  EXPECT_THAT(table.killed, ElementsAre(scheduler));
  EXPECT_EQ(supervisor.Finish(), 1);
}

TEST(SupervisorStartTest, ASchedulerThatExitsBeforeListeningFailsTheJob) {
  FakeProcessTable table;
  std::vector<std::string> said;
  Supervisor supervisor({}, RestartPolicy({}), table,
                        [&](absl::string_view m) { said.emplace_back(m); });
  const int scheduler = table.Add(Role::kScheduler, 0);
  supervisor.Start(absl::UnixEpoch());
  table.End(scheduler, 0);
  supervisor.OnEnd(scheduler, absl::UnixEpoch());
  EXPECT_EQ(said.back(), "scheduler (pid 100) exited before it wrote its port file");
  EXPECT_EQ(supervisor.Finish(), 1);
}

}  // namespace
}  // namespace cohort::launch
