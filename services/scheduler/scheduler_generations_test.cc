// SchedulerCore across generations: shards that die and come back, a restarted scheduler
// taking the job over, elastic workers that leave and join.

#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/fake_clock.h"
#include "services/membership/job_membership.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_core_testing.h"

namespace cohort {
namespace {

JobSpec Elastic(int workers, int min_workers, int max_workers) {
  JobSpec s = Spec(workers, 1);
  s.elastic = true;
  s.min_workers = min_workers;
  s.max_workers = max_workers;
  return s;
}

// With shard_restart_grace, a dead shard is waited for: it registers again under its rank at a
// new address, the cluster's generation moves on, and the workers waiting for it learn the new
// address; a worker's death still fails the job at once.
TEST(SchedulerCoreTest, ADeadShardMayComeBackUnderItsRankWithinTheGrace) {
  FakeClock clock;
  JobSpec spec = Spec(2, 2);
  spec.shard_restart_grace = absl::Seconds(30);
  SchedulerCore core(spec, &clock);
  Form(&core);
  auto first = core.WaitForCluster();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->shard_incarnations, (std::vector<std::string>{"host-0 1000", "host-1 1001"}));
  EXPECT_EQ(first->shard_restart_grace, absl::Seconds(30));
  core.ControlStreamEnded(MemberRole::kShard, 1, "connection lost", 1001);
  EXPECT_EQ(core.state(), JobState::kRunning);
  const std::vector<std::string> notices = core.TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(absl::StrContains(notices[0], "shard 1 (host host-1, pid 1001) died")) << notices[0];

  absl::StatusOr<ClusterView> later;
  std::thread waiter([&] { later = core.WaitForCluster(); });  // until shard 1 is back
  clock.Advance(absl::Seconds(20));
  for (int w = 0; w < 2; ++w) core.Heartbeat(MemberRole::kWorker, w);
  core.Heartbeat(MemberRole::kShard, 0);
  core.CheckLiveness();  // within the grace; the others beat on
  EXPECT_EQ(core.state(), JobState::kRunning);
  MemberRegistration back = Member(MemberRole::kShard, 1, "10.0.0.9:8");
  back.pid = 2001;
  EXPECT_EQ(*core.Register(back), 1);
  waiter.join();
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->shard_addresses, (std::vector<std::string>{"10.0.0.0:7", "10.0.0.9:8"}));
  EXPECT_EQ(later->shard_incarnations, (std::vector<std::string>{"host-0 1000", "host-1 2001"}));
  EXPECT_TRUE(absl::StrContains(core.TakeNotices().at(0), "shard 1 is back"));
  // The old process's stream, ending late, is no news about the new one.
  core.ControlStreamEnded(MemberRole::kShard, 1, "connection lost", 1001);
  EXPECT_EQ(core.state(), JobState::kRunning);
  EXPECT_TRUE(core.TakeNotices().empty());

  // A new process at a shard's rank before its old one was seen to die: that is its death.
  MemberRegistration replacement = Member(MemberRole::kShard, 0, "10.0.0.8:9");
  replacement.pid = 3000;
  EXPECT_EQ(*core.Register(replacement), 0);
  EXPECT_TRUE(absl::StrContains(core.TakeNotices().at(0), "replaced by a new process (pid 3000)"));

  // Not back in time: the job fails naming the shard and why it died.
  core.ControlStreamEnded(MemberRole::kShard, 1, "connection lost", 2001);
  for (int i = 0; i < 4; ++i) {
    clock.Advance(absl::Seconds(10));
    for (int w = 0; w < 2; ++w) core.Heartbeat(MemberRole::kWorker, w);
    core.Heartbeat(MemberRole::kShard, 0);
    core.CheckLiveness();
  }
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(core.reason(), "shard 1 (host host-1, pid 2001) died (its control "
                                               "stream ended (connection lost) without a stop) "
                                               "and did not come back within 30s"))
      << core.reason();
}

// Replicated shards (3 on hosts 10.0.0.0-2; share s led by shard s, backed up by s+1): shard 1
// dies and its backup, shard 2, leads share 1 from then on: the job runs on, the cluster names
// shard 2 at shard 1's place, and shares 0 and 1 have no backup. Shard 1 comes back and backs
// both up, leading nothing (the workers see no change). Shard 2 dying next hands share 1 to
// the restarted shard 1 and share 2 to shard 0; shard 0 dying then leaves no copy of share 2:
// the job fails naming it.
TEST(SchedulerCoreTest, DeadShardsHandTheirSharesToTheirBackupsAndComeBackAsBackups) {
  FakeClock clock;
  JobSpec spec = Spec(2, 3);
  spec.shard_replicas = 2;
  SchedulerCore core(spec, &clock);
  Form(&core);
  const ClusterView before = *core.WaitForCluster();
  EXPECT_EQ(before.share_leaders, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(before.share_backups, (std::vector<int>{1, 2, 0}));
  core.ControlStreamEnded(MemberRole::kShard, 1, "connection lost");
  EXPECT_EQ(core.state(), JobState::kRunning);
  std::vector<std::string> notices = core.TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(absl::StrContains(notices[0], "shard 1 (host host-1, pid 1001) died (its control "
                                            "stream ended (connection lost) without a stop): "
                                            "shard 2 (host host-2, pid 1002) leads share 1 from "
                                            "now on (no roll back); 1 share it backed up go on "
                                            "without a backup"))
      << notices[0];
  const ClusterView after = *core.WaitForCluster();
  EXPECT_EQ(after.shard_addresses,
            (std::vector<std::string>{"10.0.0.0:7", "10.0.0.2:7", "10.0.0.2:7"}));
  EXPECT_NE(after.shard_incarnations[1], before.shard_incarnations[1]);
  EXPECT_EQ(after.shard_incarnations[1], "led by shard 2: host-2 1002");
  EXPECT_EQ(after.generation, before.generation);  // the workers stay as they are
  EXPECT_EQ(after.share_leaders, (std::vector<int>{0, 2, 2}));
  EXPECT_EQ(after.share_backups, (std::vector<int>{-1, -1, 0}));

  MemberRegistration back = Member(MemberRole::kShard, 1, "10.0.0.1:8");
  back.pid = 3001;
  ASSERT_EQ(*core.Register(back), 1);
  EXPECT_TRUE(core.JoinedAsBackup(1));
  EXPECT_FALSE(core.JoinedAsBackup(0));
  notices = core.TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_TRUE(absl::StrContains(notices[0], "it backs up shares 0 (led by shard 0), 1 (led by "
                                            "shard 2), copying them from their leaders"))
      << notices[0];
  // Until shard 1 holds its copies, a leader's death loses the share: shard 2's would.
  core.CopiesHeld(1, 3001, {0, 1});
  EXPECT_TRUE(absl::StrContains(core.TakeNotices().at(1), "shard 1 holds its copy of share 1 "
                                                          "(led by shard 2)"));
  const ClusterView backed = *core.WaitForCluster();
  EXPECT_EQ(backed.shard_addresses, after.shard_addresses);
  EXPECT_EQ(backed.shard_incarnations, after.shard_incarnations);
  EXPECT_EQ(backed.share_backups, (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(backed.share_backup_addresses,
            (std::vector<std::string>{"10.0.0.1:8", "10.0.0.1:8", "10.0.0.0:7"}));

  core.ControlStreamEnded(MemberRole::kShard, 2, "connection lost");
  EXPECT_EQ(core.state(), JobState::kRunning);
  const ClusterView second = *core.WaitForCluster();
  EXPECT_EQ(second.share_leaders, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(second.share_backups, (std::vector<int>{1, -1, -1}));
  EXPECT_EQ(second.shard_addresses,
            (std::vector<std::string>{"10.0.0.0:7", "10.0.0.1:8", "10.0.0.0:7"}));
  EXPECT_EQ(second.shard_incarnations[1], absl::StrCat(back.host, " 3001"));
  EXPECT_EQ(second.shard_incarnations[2], "led by shard 0: host-0 1000");

  core.ControlStreamEnded(MemberRole::kShard, 0, "connection lost");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(core.reason(), "shard 0 (host host-0, pid 1000) is dead: its "
                                               "control stream ended (connection lost) without "
                                               "a stop; share 2 it led had no backup left"))
      << core.reason();
}

// A shard that came back dies, or its share's leader does, before it holds the copy: the
// share's only copy was the leader's, and its death fails the job saying so.
TEST(SchedulerCoreTest, ALeaderDyingBeforeItsNewBackupHoldsTheCopyFailsTheJob) {
  FakeClock clock;
  JobSpec spec = Spec(2, 2);
  spec.shard_replicas = 2;
  SchedulerCore core(spec, &clock);
  Form(&core);
  core.ControlStreamEnded(MemberRole::kShard, 1, "connection lost");
  MemberRegistration back = Member(MemberRole::kShard, 1, "10.0.0.1:8");
  back.pid = 3001;
  ASSERT_TRUE(core.Register(back).ok());
  core.CopiesHeld(1, 1001, {0, 1});  // the dead process's word counts for nothing
  core.CopiesHeld(1, 3001, {0});
  core.ControlStreamEnded(MemberRole::kShard, 0, "connection lost");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(core.reason(), "share 1 it led was still being copied to its "
                                               "new backup, shard 1, so the job's only copy of "
                                               "it died with it"))
      << core.reason();
}

// A member whose control stream broke registers again: the same scheduler keeps it where it
// is; a scheduler restarted mid-job takes every member of the running job back under its rank
// and runs the job once all are in.
TEST(SchedulerCoreTest, MembersRegisteringAgainKeepTheirPlaceOrFormTheJobAgain) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  Form(&core);
  MemberRegistration again = Member(MemberRole::kWorker, 1);
  again.rejoin = true;
  EXPECT_EQ(*core.Register(again), 1);
  EXPECT_EQ(core.state(), JobState::kRunning);
  MemberRegistration impostor = again;
  impostor.pid = 99;
  EXPECT_FALSE(core.Register(impostor).ok());

  // A shard whose control stream broke for a moment, taken for dead while the job may restart
  // shards, keeps its place when it registers again.
  JobSpec restartable = Spec(1, 1);
  restartable.shard_restart_grace = absl::Seconds(30);
  SchedulerCore blip(restartable, &clock);
  Form(&blip);
  blip.ControlStreamEnded(MemberRole::kShard, 0, "connection lost");
  MemberRegistration same_shard = Member(MemberRole::kShard, 0, "10.0.0.0:7");
  same_shard.rejoin = true;
  EXPECT_EQ(*blip.Register(same_shard), 0);
  clock.Advance(absl::Seconds(40));
  blip.Heartbeat(MemberRole::kShard, 0);
  blip.Heartbeat(MemberRole::kWorker, 0);
  blip.CheckLiveness();
  EXPECT_EQ(blip.state(), JobState::kRunning);

  SchedulerCore restarted(Spec(2, 1), &clock);
  MemberRegistration shard = Member(MemberRole::kShard, 0, "10.0.0.0:7");
  shard.rejoin = true;
  ASSERT_EQ(*restarted.Register(shard), 0);
  MemberRegistration w0 = Member(MemberRole::kWorker, 0);
  w0.rejoin = true;
  ASSERT_EQ(*restarted.Register(w0), 0);
  EXPECT_EQ(restarted.state(), JobState::kForming);
  ASSERT_EQ(*restarted.Register(again), 1);
  EXPECT_EQ(restarted.state(), JobState::kRunning);
  EXPECT_EQ(restarted.WaitForCluster()->shard_addresses, std::vector<std::string>{"10.0.0.0:7"});
  const std::vector<std::string> notices = restarted.TakeNotices();
  ASSERT_EQ(notices.size(), 3u);
  EXPECT_EQ(notices[2], "worker 1 (host host-1, pid 1001) joined again: this scheduler took over "
                        "a running job");
}

// An elastic job: a worker's death starts a new generation without it (a barrier in progress
// is not passed: its waiters learn the generation), the others barrier in the new generation
// and a barrier of the old one is refused; a joining worker takes a new rank and starts the
// next generation; below min_workers the job fails; past max_workers a join is refused; the
// job is done when the current generation's workers finished.
TEST(SchedulerCoreTest, ElasticWorkersDieAndJoinInNewGenerations) {
  FakeClock clock;
  SchedulerCore core(Elastic(3, 2, 3), &clock);
  Form(&core);
  ASSERT_EQ(core.generation(), 0);
  absl::StatusOr<uint64_t> waited;
  std::thread waiter([&] { waited = core.Barrier(0, "step", 0, 0); });
  absl::SleepFor(absl::Milliseconds(50));  // rank 0 waits for the others
  core.ControlStreamEnded(MemberRole::kWorker, 1, "killed");
  waiter.join();
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(ChangedGeneration(waited.status()), 1) << waited.status();
  EXPECT_TRUE(absl::StrContains(waited.status().message(), "worker 1 (host host-1, pid 1001) died"))
      << waited.status();
  EXPECT_EQ(core.state(), JobState::kRunning);
  EXPECT_EQ(core.generation(), 1);
  auto view = core.WaitForCluster();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->generation, 1);
  EXPECT_EQ(view->workers, (std::vector<int>{0, 2}));
  EXPECT_EQ(ChangedGeneration(core.Barrier(2, "old", 0, 0).status()), 1);
  EXPECT_EQ(core.Barrier(1, "dead", 0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  std::thread second([&] { waited = core.Barrier(0, "regroup", 0, 1); });
  EXPECT_TRUE(core.Barrier(2, "regroup", 0, 1).ok());
  second.join();
  EXPECT_TRUE(waited.ok()) << waited.status();
  // The dead worker's silence afterwards is no new death.
  clock.Advance(absl::Seconds(10));
  core.Heartbeat(MemberRole::kShard, 0);
  core.Heartbeat(MemberRole::kWorker, 0);
  core.Heartbeat(MemberRole::kWorker, 2);
  core.CheckLiveness();
  EXPECT_EQ(core.generation(), 1);

  MemberRegistration joiner = Member(MemberRole::kWorker, -1);
  joiner.host = "host-9";
  joiner.pid = 9;
  EXPECT_EQ(*core.Register(joiner), 3);
  EXPECT_EQ(core.generation(), 2);
  const absl::StatusOr<ClusterView> joined = core.WaitForCluster();
  EXPECT_EQ(joined->workers, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(joined->worker_hosts, (std::vector<std::string>{"host-0", "host-2", "host-9"}));
  EXPECT_EQ(core.Register(joiner).status().code(), absl::StatusCode::kResourceExhausted);
  const nlohmann::json status = nlohmann::json::parse(core.StatusJson());
  EXPECT_EQ(status["generation"], 2);
  EXPECT_EQ(status["num_workers"], 3);

  for (int w : {0, 2}) core.MemberStopped(MemberRole::kWorker, w, "");
  EXPECT_EQ(core.state(), JobState::kRunning);  // worker 3 still trains
  core.MemberStopped(MemberRole::kWorker, 3, "");
  EXPECT_EQ(core.state(), JobState::kDone);
  EXPECT_EQ(core.reason(), "all 3 workers finished");
}

TEST(SchedulerCoreTest, ElasticJobFailsBelowMinWorkers) {
  FakeClock clock;
  SchedulerCore core(Elastic(2, 2, 2), &clock);
  Form(&core);
  core.ControlStreamEnded(MemberRole::kWorker, 0, "killed");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(core.reason(), "1 worker left, fewer than --min_workers=2"))
      << core.reason();
}

TEST(SchedulerCoreTest, AMemberThatLeavesWithAnErrorIsADeathTheJobMayOutlive) {
  FakeClock clock;
  SchedulerCore core(Elastic(3, 2, 3), &clock);
  Form(&core);
  // An elastic job's worker stopped by its engine: the others go on in a new generation.
  core.MemberStopped(MemberRole::kWorker, 2, "stopped by SIGTERM");
  EXPECT_EQ(core.state(), JobState::kRunning);
  EXPECT_EQ(core.generation(), 1);
  // A shard without a restart grace: the job fails naming it and its error.
  core.MemberStopped(MemberRole::kShard, 0, "stopped by SIGTERM");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(core.reason(), "shard 0")) << core.reason();
  EXPECT_TRUE(absl::StrContains(core.reason(), "failed: stopped by SIGTERM")) << core.reason();
}

// A worker that leaves with an error fails the job; once every member's control stream ended,
// its own included, nobody is left to wait for (the scheduler exits at once, not after the
// heartbeat timeout).
TEST(SchedulerCoreTest, TheStreamOfAMemberThatFailedIsNotWaitedForAtTheEnd) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  Form(&core);
  core.Heartbeat(MemberRole::kShard, 0);
  for (int w = 0; w < 2; ++w) core.Heartbeat(MemberRole::kWorker, w);
  core.MemberStopped(MemberRole::kWorker, 1, "the program exited with status 1");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_FALSE(core.WaitForMembersToLeave(absl::ZeroDuration()));
  core.ControlStreamEnded(MemberRole::kShard, 0, "closed");
  core.ControlStreamEnded(MemberRole::kWorker, 0, "closed");
  core.ControlStreamEnded(MemberRole::kWorker, 1, "closed");
  EXPECT_TRUE(core.WaitForMembersToLeave(absl::ZeroDuration()));
}

TEST(SchedulerCoreTest, StopEndsTheJobWithTheReasonGiven) {
  FakeClock clock;
  SchedulerCore core(Elastic(2, 1, 2), &clock);
  Form(&core);
  core.Stop("the scheduler was stopped by SIGTERM");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_EQ(core.reason(), "the scheduler was stopped by SIGTERM");
  EXPECT_TRUE(core.WaitUntilEnded(absl::ZeroDuration()));
}

// Stopped before every member joined (a worker's program failed before it did): the reason
// names the missing members.
TEST(SchedulerCoreTest, AStopWhileTheJobFormsNamesTheMembersMissing) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  ASSERT_TRUE(core.Register(Member(MemberRole::kShard, 0, "10.0.0.0:7")).ok());
  ASSERT_TRUE(core.Register(Member(MemberRole::kWorker, 0)).ok());
  core.Stop("the scheduler was stopped by SIGTERM");
  EXPECT_EQ(core.reason(),
            "the scheduler was stopped by SIGTERM while the job formed (missing worker 1)");
}

}  // namespace
}  // namespace cohort
