#include "services/scheduler/scheduler_core.h"

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/fake_clock.h"
#include "services/common/test_tmp_dir.h"
#include "services/scheduler/scheduler_core_testing.h"

namespace cohort {
namespace {

TEST(SchedulerCoreTest, RanksAreAssignedAndTheJobRunsOnceEveryoneRegistered) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 2), &clock);
  EXPECT_EQ(*core.Register(Member(MemberRole::kWorker, 1)), 1);
  EXPECT_EQ(*core.Register(Member(MemberRole::kWorker, -1)), 0);  // lowest free
  EXPECT_EQ(core.Register(Member(MemberRole::kWorker, -1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(core.Register(Member(MemberRole::kShard, 5)).status().message(),
            "shard rank 5 requested, but job job-test has 2 shards (ranks 0..1)");
  ASSERT_TRUE(core.Register(Member(MemberRole::kShard, 1, "b:2")).ok());
  EXPECT_EQ(core.Register(Member(MemberRole::kShard, 1, "c:3")).status().message(),
            "shard rank 1 is already taken by shard 1 (host host-1, pid 1001)");
  EXPECT_EQ(core.state(), JobState::kForming);
  ASSERT_TRUE(core.Register(Member(MemberRole::kShard, 0, "a:1")).ok());
  EXPECT_EQ(core.state(), JobState::kRunning);
  auto view = core.WaitForCluster();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->shard_addresses, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_FALSE(core.Register(Member(MemberRole::kWorker, -1)).ok());  // formed: no more joins
}

TEST(SchedulerCoreTest, ALoopbackShardAddressIsRefusedOnceTheJobSpansHosts) {
  FakeClock clock;
  auto on = [](MemberRegistration r, const std::string& host) {
    r.host = host;
    return r;
  };
  {  // The shard comes second: it is refused, naming the flag.
    SchedulerCore core(Spec(1, 1), &clock);
    ASSERT_TRUE(core.Register(on(Member(MemberRole::kWorker, 0), "node2")).ok());
    const absl::Status s =
        core.Register(on(Member(MemberRole::kShard, 0, "127.0.0.1:7"), "node1")).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(),
              "shard 0 on host node1 would be dialled at 127.0.0.1:7, a loopback address, but "
              "worker 0 (host node2, pid 1000) is on another host: start the shard with "
              "--advertise_address=<an address of node1 the other hosts reach>");
  }
  {  // The shard came first: the member from another host is refused, naming the shard.
    SchedulerCore core(Spec(1, 1), &clock);
    ASSERT_TRUE(core.Register(on(Member(MemberRole::kShard, 0, "[::1]:7"), "node1")).ok());
    const absl::Status s =
        core.Register(on(Member(MemberRole::kWorker, 0), "node2")).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(s.message(), "worker 0 on host node2 could not reach shard 0 "
                                               "(host node1, pid 1000) at [::1]:7"))
        << s.message();
  }
  {  // On one host, loopback is fine; across hosts, reachable addresses are.
    SchedulerCore one(Spec(1, 1), &clock);
    ASSERT_TRUE(one.Register(on(Member(MemberRole::kShard, 0, "127.0.0.1:7"), "node1")).ok());
    ASSERT_TRUE(one.Register(on(Member(MemberRole::kWorker, 0), "node1")).ok());
    SchedulerCore two(Spec(1, 1), &clock);
    ASSERT_TRUE(two.Register(on(Member(MemberRole::kShard, 0, "10.0.0.1:7"), "node1")).ok());
    ASSERT_TRUE(two.Register(on(Member(MemberRole::kWorker, 0), "node2")).ok());
  }
}

TEST(SchedulerCoreTest, WaitForClusterBlocksUntilTheJobForms) {
  FakeClock clock;
  SchedulerCore core(Spec(1, 1), &clock);
  absl::StatusOr<ClusterView> view;
  std::thread waiter([&] { view = core.WaitForCluster(); });
  ASSERT_TRUE(core.Register(Member(MemberRole::kWorker, 0)).ok());
  ASSERT_TRUE(core.Register(Member(MemberRole::kShard, 0, "s:1")).ok());
  waiter.join();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->shard_addresses.size(), 1u);
}

TEST(SchedulerCoreTest, AWaitForTheClusterHoldsNoThreadAndIsAnsweredByTheLastRegistration) {
  FakeClock clock;
  SchedulerCore core(Spec(1, 1), &clock);
  std::vector<absl::StatusOr<ClusterView>> views;
  core.WaitForClusterAsync([&](absl::StatusOr<ClusterView> v) { views.push_back(std::move(v)); });
  ASSERT_TRUE(core.Register(Member(MemberRole::kWorker, 0)).ok());
  EXPECT_TRUE(views.empty());  // still forming
  ASSERT_TRUE(core.Register(Member(MemberRole::kShard, 0, "s:1")).ok());
  ASSERT_EQ(views.size(), 1u);  // answered by the registration that formed the job
  ASSERT_TRUE(views[0].ok());
  EXPECT_EQ(views[0]->shard_addresses, std::vector<std::string>{"s:1"});
  EXPECT_EQ(views[0]->workers, std::vector<int>{0});
  core.WaitForClusterAsync([&](absl::StatusOr<ClusterView> v) { views.push_back(std::move(v)); });
  EXPECT_EQ(views.size(), 2u);  // a running job's is answered at once
}

TEST(SchedulerCoreTest, AWaitForTheClusterOfAJobThatFailsGetsItsReason) {
  FakeClock clock;
  SchedulerCore core(Spec(1, 1), &clock);
  std::optional<absl::StatusOr<ClusterView>> view;
  core.WaitForClusterAsync([&](absl::StatusOr<ClusterView> v) { view = std::move(v); });
  core.Stop("the scheduler was stopped by SIGTERM");
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(view->status().message(),
            "the scheduler was stopped by SIGTERM while the job formed (missing shard 0, "
            "worker 0)");
}

TEST(SchedulerCoreTest, SilentMemberFailsTheJobNamingItsHostAndLastError) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  Form(&core);
  clock.Advance(absl::Seconds(2));
  core.Heartbeat(MemberRole::kShard, 0);
  core.Heartbeat(MemberRole::kWorker, 0);
  core.CheckLiveness();
  EXPECT_EQ(core.state(), JobState::kRunning);
  clock.Advance(absl::Seconds(1.5));  // worker 1: 3.5 s silent; the others 1.5 s
  core.CheckLiveness();
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_EQ(core.reason(),
            "worker 1 (host host-1, pid 1001) is dead: no heartbeat for 3.5s (limit 3s); last "
            "error: none reported");
  EXPECT_EQ(core.Heartbeat(MemberRole::kWorker, 0), JobState::kFailed);
}

TEST(SchedulerCoreTest, ControlStreamEndingWithoutAStopFailsTheJobAtOnce) {
  FakeClock clock;
  SchedulerCore core(Spec(1, 2), &clock);
  Form(&core);
  core.Heartbeat(MemberRole::kShard, 1);
  core.ControlStreamEnded(MemberRole::kShard, 1, "connection lost");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_EQ(core.reason(),
            "shard 1 (host host-1, pid 1001) is dead: its control stream ended (connection "
            "lost) without a stop; last error: none reported");
  // After a stop, the stream's end is the member leaving.
  SchedulerCore done(Spec(1, 1), &clock);
  Form(&done);
  done.MemberStopped(MemberRole::kWorker, 0, "");
  done.ControlStreamEnded(MemberRole::kWorker, 0, "closed by the member");
  EXPECT_EQ(done.state(), JobState::kDone);
  // Once the job has ended, a shard closing its stream leaves; it did not die.
  done.ControlStreamEnded(MemberRole::kShard, 0, "closed by the member");
  EXPECT_EQ(done.state(), JobState::kDone);
  EXPECT_EQ(done.Status().members[0].role, MemberRole::kShard);
  EXPECT_EQ(done.Status().members[0].state, MemberState::kStopped);
}

// A host dies: its shard's death reaches the scheduler after a worker elsewhere reported losing
// that shard. The verdict names the dead shard (and says what the worker saw), not the worker.
TEST(SchedulerCoreTest, AWorkerThatLostAShardIsNotBlamedForTheShardsDeath) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 2), &clock);
  Form(&core);
  core.MemberStopped(MemberRole::kWorker, 0, "the stream to shard 1 ended", /*lost_shard=*/1);
  EXPECT_EQ(core.state(), JobState::kRunning);  // held, waiting to hear of shard 1
  core.ControlStreamEnded(MemberRole::kShard, 1, "connection reset");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_EQ(core.reason(),
            "shard 1 (host host-1, pid 1001) is dead: its control stream ended (connection "
            "reset) without a stop; last error: none reported; before that, worker 0 (host "
            "host-0, pid 1000) failed: the stream to shard 1 ended");

  // A shard that is found alive: the worker's own failure ends the job at the timeout.
  SchedulerCore alive(Spec(2, 2), &clock);
  Form(&alive);
  alive.MemberStopped(MemberRole::kWorker, 1, "the stream to shard 0 ended", 0);
  for (int r : {0, 1}) alive.Heartbeat(MemberRole::kShard, r);
  alive.Heartbeat(MemberRole::kWorker, 0);
  clock.Advance(absl::Seconds(2));
  for (int r : {0, 1}) alive.Heartbeat(MemberRole::kShard, r);
  alive.Heartbeat(MemberRole::kWorker, 0);
  alive.CheckLiveness();
  EXPECT_EQ(alive.state(), JobState::kRunning);
  clock.Advance(absl::Seconds(1.5));
  for (int r : {0, 1}) alive.Heartbeat(MemberRole::kShard, r);
  alive.Heartbeat(MemberRole::kWorker, 0);
  alive.CheckLiveness();
  EXPECT_EQ(alive.state(), JobState::kFailed);
  EXPECT_EQ(alive.reason(),
            "worker 1 (host host-1, pid 1001) failed: the stream to shard 0 ended");

  // A failure that is no lost shard, or a shard already known dead, fails at once.
  SchedulerCore other(Spec(1, 1), &clock);
  Form(&other);
  other.MemberStopped(MemberRole::kWorker, 0, "the loss is NaN");
  EXPECT_EQ(other.state(), JobState::kFailed);
}

// The slowest worker is the one with the most compute a step (step time less its time in the
// kvstore): named in /status, and in a notice every report interval while it holds the others
// up by more than the share; not while the workers are even.
TEST(SchedulerCoreTest, TheSlowestWorkerIsNamedWithItsLag) {
  FakeClock clock;
  SchedulerCore core(Spec(3, 1), &clock);
  Form(&core);
  const auto beat = [&](int rank, int64_t step, double step_seconds, double comm) {
    WorkerProgress p;
    p.step = step;
    p.step_seconds = step_seconds;
    p.communication_overhead = comm;
    core.Heartbeat(MemberRole::kWorker, rank, &p);
  };
  core.Heartbeat(MemberRole::kShard, 0);
  beat(0, 100, 0.25, 0.6);  // 0.10 s of compute, waiting the rest
  beat(1, 100, 0.25, 0.5);  // 0.125 s
  beat(2, 98, 0.25, 0.0);   // 0.25 s: the others wait for it
  const std::optional<Straggler> s = core.FindStraggler();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->host, "host-2");
  EXPECT_EQ(s->fastest_rank, 0);
  EXPECT_NEAR(s->lag_seconds, 0.15, 1e-9);
  EXPECT_EQ(s->lag_steps, 2);
  const nlohmann::json status = nlohmann::json::parse(core.StatusJson());
  EXPECT_EQ(status["straggler"]["rank"], 2);
  EXPECT_EQ(core.TakeSnapshot().straggler->rank, 2);

  core.CheckLiveness();
  EXPECT_TRUE(core.TakeNotices().empty());  // not before the report interval
  clock.Advance(absl::Seconds(1));
  for (int r = 0; r < 3; ++r) beat(r, 100, 0.25, r == 2 ? 0.0 : 0.6);
  core.Heartbeat(MemberRole::kShard, 0);
  clock.Advance(core.spec().straggler_report_interval);
  for (int r = 0; r < 3; ++r) beat(r, 100, 0.25, r == 2 ? 0.0 : 0.6);
  core.Heartbeat(MemberRole::kShard, 0);
  core.CheckLiveness();
  const std::vector<std::string> notices = core.TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0],
            "worker 2 (host host-2) is the slowest: 0.250 s of compute a step, 0.150 s (150%) "
            "more than worker 0, which every other worker waits for at every step (dist_sync); "
            "see docs/reliability.md, stragglers");

  // Even workers: nobody is named.
  clock.Advance(core.spec().straggler_report_interval);
  for (int r = 0; r < 3; ++r) beat(r, 101, 0.25, r == 2 ? 0.55 : 0.6);
  core.Heartbeat(MemberRole::kShard, 0);
  core.CheckLiveness();
  EXPECT_TRUE(core.TakeNotices().empty());
}

TEST(SchedulerCoreTest, JobThatDoesNotFormInTimeFailsNamingWhoIsMissing) {
  FakeClock clock;
  JobSpec spec = Spec(2, 1);
  spec.form_timeout = absl::Seconds(10);
  SchedulerCore core(spec, &clock);
  ASSERT_TRUE(core.Register(Member(MemberRole::kWorker, 0)).ok());
  absl::StatusOr<ClusterView> view;
  std::thread waiter([&] { view = core.WaitForCluster(); });
  clock.Advance(absl::Seconds(11));
  core.CheckLiveness();
  waiter.join();
  EXPECT_EQ(view.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(core.reason(), "did not form within 10s: missing shard 0, worker 1"))
      << core.reason();
}

TEST(SchedulerCoreTest, MemberErrorFailsTheJobAndFinishedWorkersEndIt) {
  FakeClock clock;
  SchedulerCore failing(Spec(2, 1), &clock);
  Form(&failing);
  failing.MemberStopped(MemberRole::kWorker, 1, "the stream to shard 0 ended");
  EXPECT_EQ(failing.state(), JobState::kFailed);
  EXPECT_EQ(failing.reason(),
            "worker 1 (host host-1, pid 1001) failed: the stream to shard 0 ended");

  SchedulerCore done(Spec(2, 1), &clock);
  Form(&done);
  done.MemberStopped(MemberRole::kWorker, 0, "");
  clock.Advance(absl::Seconds(10));  // a finished worker is not expected to beat
  done.Heartbeat(MemberRole::kWorker, 1);
  done.Heartbeat(MemberRole::kShard, 0);
  done.CheckLiveness();
  EXPECT_EQ(done.state(), JobState::kRunning);
  done.MemberStopped(MemberRole::kWorker, 1, "");
  EXPECT_EQ(done.state(), JobState::kDone);
  EXPECT_TRUE(done.WaitUntilEnded(absl::ZeroDuration()));
}

// A member of the running job joining a scheduler restarted mid-job.
MemberRegistration Rejoining(MemberRole role, int rank) {
  MemberRegistration r = Member(role, rank, role == MemberRole::kShard ? "10.0.0.9:7" : "");
  r.rejoin = true;
  return r;
}

TEST(SchedulerCoreTest, ARestartedSchedulerKnowsFromTheJournalWhoFinished) {
  FakeClock clock;
  const std::string path = TmpDir() + "/takeover.journal";
  std::remove(path.c_str());
  {
    auto journal = JobJournal::Open(path, "job-test");
    ASSERT_TRUE(journal.ok()) << journal.status();
    SchedulerCore before(Spec(2, 1), &clock, journal->get());
    Form(&before);
    before.MemberStopped(MemberRole::kWorker, 1, "");
    EXPECT_EQ(before.state(), JobState::kRunning);
  }  // the scheduler is killed
  auto journal = JobJournal::Open(path, "job-test");
  ASSERT_TRUE(journal.ok()) << journal.status();
  SchedulerCore after(Spec(2, 1), &clock, journal->get());
  EXPECT_EQ(after.state(), JobState::kForming);
  ASSERT_TRUE(after.Register(Rejoining(MemberRole::kShard, 0)).ok());
  // Worker 0 finishes before it joined again: that ends the job.
  after.MemberStopped(MemberRole::kWorker, 0, "");
  EXPECT_EQ(after.state(), JobState::kDone);
  EXPECT_EQ(after.reason(), "all 2 workers finished");
  absl::StatusOr<JournalState> recorded = ReadJournal(path);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ(DescribeJournal(*recorded), "the job ended DONE (all 2 workers finished)");

  // A third scheduler serves the ended job; a shard joining again learns it from its heartbeat.
  auto third_journal = JobJournal::Open(path, "job-test");
  ASSERT_TRUE(third_journal.ok()) << third_journal.status();
  SchedulerCore third(Spec(2, 1), &clock, third_journal->get());
  EXPECT_EQ(third.state(), JobState::kDone);
  ASSERT_TRUE(third.Register(Rejoining(MemberRole::kShard, 0)).ok());
  EXPECT_EQ(third.Heartbeat(MemberRole::kShard, 0), JobState::kDone);
  EXPECT_FALSE(third.Register(Member(MemberRole::kShard, 0)).ok());  // a new one is not
}

// Replicated shards: shard 1 died and shard 2 leads its share when the scheduler is killed. The
// restarted scheduler reads who leads and backs up each share from the journal: the job forms
// again without the dead shard, the cluster still names shard 2 at shard 1's place, and shard
// 1 coming back later backs up the shares left without a backup.
TEST(SchedulerCoreTest, ARestartedSchedulerKnowsFromTheJournalWhoLeadsEachShare) {
  FakeClock clock;
  const std::string path = TmpDir() + "/shares.journal";
  std::remove(path.c_str());
  JobSpec spec = Spec(2, 3);
  spec.shard_replicas = 2;
  ClusterView before;
  {
    auto journal = JobJournal::Open(path, "job-test");
    ASSERT_TRUE(journal.ok()) << journal.status();
    SchedulerCore first(spec, &clock, journal->get());
    Form(&first);
    first.ControlStreamEnded(MemberRole::kShard, 1, "connection lost");
    before = *first.WaitForCluster();
  }  // the scheduler is killed
  auto journal = JobJournal::Open(path, "job-test");
  ASSERT_TRUE(journal.ok()) << journal.status();
  SchedulerCore after(spec, &clock, journal->get());
  for (int s : {0, 2}) {
    MemberRegistration r = Member(MemberRole::kShard, s, absl::StrCat("10.0.0.", s, ":7"));
    r.rejoin = true;
    ASSERT_TRUE(after.Register(r).ok());
  }
  for (int w : {0, 1}) ASSERT_TRUE(after.Register(Rejoining(MemberRole::kWorker, w)).ok());
  EXPECT_EQ(after.state(), JobState::kRunning);
  const ClusterView view = *after.WaitForCluster();
  EXPECT_EQ(view.share_leaders, (std::vector<int>{0, 2, 2}));
  EXPECT_EQ(view.share_backups, (std::vector<int>{-1, -1, 0}));
  EXPECT_EQ(view.shard_addresses, before.shard_addresses);
  MemberRegistration back = Member(MemberRole::kShard, 1, "10.0.0.1:8");
  back.pid = 3001;
  ASSERT_TRUE(after.Register(back).ok());
  EXPECT_TRUE(after.JoinedAsBackup(1));
  EXPECT_EQ(after.WaitForCluster()->share_backups, (std::vector<int>{1, 1, 0}));
}

TEST(SchedulerCoreTest, AWorkerFinishingBeforeItJoinedAFreshSchedulerAgainKeepsItForming) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  ASSERT_TRUE(core.Register(Rejoining(MemberRole::kShard, 0)).ok());
  ASSERT_TRUE(core.Register(Rejoining(MemberRole::kWorker, 1)).ok());
  core.MemberStopped(MemberRole::kWorker, 0, "");
  EXPECT_EQ(core.state(), JobState::kForming);  // worker 1 has not finished
  core.MemberStopped(MemberRole::kWorker, 1, "");
  EXPECT_EQ(core.state(), JobState::kDone);
}

TEST(SchedulerCoreTest, BarrierReleasesEveryWorkerWithTheAgreedFingerprint) {
  FakeClock clock;
  SchedulerCore core(Spec(3, 1), &clock);
  Form(&core);
  for (int round = 0; round < 2; ++round) {
    std::vector<absl::StatusOr<uint64_t>> got(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] { got[r] = core.Barrier(r, "init", 0xabc); });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(got[r].ok()) << got[r].status();
      EXPECT_EQ(*got[r], 0xabcu);
    }
  }
}

// An exchange: every worker gets what each brought, by rank, whatever the order they came in;
// bytes past the limit fail the job saying what to use instead.
TEST(SchedulerCoreTest, AnExchangeGivesEveryWorkerWhatEachBrought) {
  FakeClock clock;
  SchedulerCore core(Spec(3, 1), &clock);
  Form(&core);
  std::vector<absl::StatusOr<SchedulerCore::BarrierPassed>> got(3);
  absl::Mutex mu;
  for (int r : {2, 0, 1}) {
    core.BarrierAsync(r, "metric", 0, 0, absl::StrCat("from ", r, std::string(1, '\0')),
                      [&, r](absl::StatusOr<SchedulerCore::BarrierPassed> passed) {
                        absl::MutexLock lock(&mu);
                        got[r] = std::move(passed);
                      });
  }
  const std::vector<std::string> want = {std::string("from 0\0", 7), std::string("from 1\0", 7),
                                         std::string("from 2\0", 7)};
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(got[r].ok()) << got[r].status();
    EXPECT_EQ(*got[r]->payloads, want);
  }

  absl::StatusOr<SchedulerCore::BarrierPassed> refused;
  core.BarrierAsync(0, "huge", 0, 0, std::string(SchedulerCore::kMaxExchangeBytes + 1, 'x'),
                    [&](absl::StatusOr<SchedulerCore::BarrierPassed> passed) {
                      refused = std::move(passed);
                    });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(core.reason(), "brought 12582913 bytes to 'huge'"))
      << core.reason();
  EXPECT_TRUE(absl::StrContains(core.reason(), "send parameters and gradients through the "
                                               "kvstore")) << core.reason();
}

// Workers sharing a host key meet there first: the scheduler sends each of their calls there
// but their leader's bringing every other one, which counts for all; workers without a key
// are alone.
TEST(SchedulerCoreTest, OneCallArrivesForAHostsWorkersAndTheOthersAreSentToMeetThere) {
  FakeClock clock;
  SchedulerCore core(Spec(4, 1), &clock);
  ASSERT_TRUE(core.Register(Member(MemberRole::kShard, 0, "10.0.0.1:7")).ok());
  const char* keys[] = {"kernel a", "kernel a", "kernel b", ""};
  for (int w = 0; w < 4; ++w) {
    MemberRegistration r = Member(MemberRole::kWorker, w);
    r.host_key = keys[w];
    ASSERT_TRUE(core.Register(r).ok());
  }
  const absl::StatusOr<ClusterView> view = core.WaitForCluster();
  ASSERT_TRUE(view.ok());
  const HostGroups& groups = *view->host_groups;
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups.at(0).leader, 0);
  EXPECT_EQ(groups.at(0).workers, 2);
  EXPECT_EQ(groups.at(1).leader, 0);
  EXPECT_EQ(groups.at(1).workers, 2);
  EXPECT_EQ(groups.at(2).leader, 2);
  EXPECT_EQ(groups.at(2).workers, 1);
  EXPECT_EQ(groups.at(3).leader, 3);
  EXPECT_EQ(groups.at(3).workers, 1);
  // Sent to meet: worker 1, and worker 0 bringing nobody; counted: the others.
  const std::optional<HostGroup> sent = core.MeetOnHostFirst(1, 0, 0);
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(sent->leader, 0);
  EXPECT_EQ(sent->workers, 2);
  EXPECT_TRUE(core.MeetOnHostFirst(0, 0, 0).has_value());
  EXPECT_FALSE(core.MeetOnHostFirst(0, 0, 1).has_value());
  EXPECT_FALSE(core.MeetOnHostFirst(2, 0, 0).has_value());
  EXPECT_FALSE(core.MeetOnHostFirst(3, 0, 0).has_value());
  EXPECT_FALSE(core.MeetOnHostFirst(1, 7, 0).has_value());  // another generation: answered so

  std::vector<absl::StatusOr<SchedulerCore::BarrierPassed>> got(4, absl::UnknownError("none"));
  auto keep = [&](int r) {
    return [&got, r](absl::StatusOr<SchedulerCore::BarrierPassed> p) { got[r] = std::move(p); };
  };
  // A call may bring only other workers of the host it leads, each once; nothing is counted.
  const SchedulerCore::Arrival from_a{1, "init", 5};
  const SchedulerCore::Arrival twice[] = {from_a, from_a};
  core.BarrierAsync(2, "init", 5, 0, "", keep(2), {&from_a, 1});
  EXPECT_EQ(got[2].status().code(), absl::StatusCode::kInvalidArgument) << got[2].status();
  core.BarrierAsync(0, "init", 5, 0, "", keep(0), twice);
  EXPECT_EQ(got[0].status().code(), absl::StatusCode::kInvalidArgument) << got[0].status();
  EXPECT_EQ(core.TakeSnapshot().barrier_calls, 0);
  got.assign(4, absl::UnknownError("none"));
  // Worker 2 and 3 alone, then worker 0 bringing worker 1: the last arrival releases all.
  core.BarrierAsync(2, "init", 5, 0, "", keep(2));
  core.BarrierAsync(3, "init", 5, 0, "", keep(3));
  EXPECT_FALSE(got[2].ok());
  const SchedulerCore::Arrival one{1, "init", 5};
  core.BarrierAsync(0, "init", 5, 0, "", keep(0), {&one, 1});
  ASSERT_TRUE(got[0].ok()) << got[0].status();
  ASSERT_TRUE(got[2].ok()) << got[2].status();
  EXPECT_EQ(got[0]->fingerprint, 5u);
  const SchedulerSnapshot counted = core.TakeSnapshot();
  EXPECT_EQ(counted.barrier_calls, 3);
  EXPECT_EQ(counted.barrier_arrivals, 4);

  // A worker of the host at another barrier fails the job, naming it.
  const SchedulerCore::Arrival astray{1, "other", 0};
  absl::StatusOr<SchedulerCore::BarrierPassed> refused;
  core.BarrierAsync(0, "next", 0, 0, "", [&](auto p) { refused = std::move(p); },
                    {&astray, 1});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(core.reason(), "worker 1 (host host-1, pid 1001) reached "
                                               "barrier 'other' while the others wait at 'next'"))
      << core.reason();
}

TEST(SchedulerCoreTest, DifferentPartitionMapsFailTheJobAndReleaseTheWaiters) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  Form(&core);
  absl::StatusOr<uint64_t> first;
  std::thread waiter([&] { first = core.Barrier(0, "init", 0x1); });
  absl::SleepFor(absl::Milliseconds(20));
  auto second = core.Barrier(1, "init", 0x2);
  waiter.join();
  EXPECT_FALSE(second.ok());
  EXPECT_FALSE(first.ok());
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(core.reason(), "different models or pass different --part_bytes"))
      << core.reason();
}

TEST(SchedulerCoreTest, FailureReleasesABarrierWaiter) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  Form(&core);
  absl::StatusOr<uint64_t> got;
  std::thread waiter([&] { got = core.Barrier(0, "step", 0); });
  absl::SleepFor(absl::Milliseconds(20));
  core.MemberStopped(MemberRole::kShard, 0, "out of memory");
  waiter.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "shard 0 (host host-0, pid 1000) failed"));
}

TEST(SchedulerCoreTest, StatusJsonListsTheMembers) {
  FakeClock clock;
  SchedulerCore core(Spec(1, 1), &clock);
  Form(&core);
  const std::string json = core.StatusJson();
  EXPECT_TRUE(absl::StrContains(json, "\"state\":\"RUNNING\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"address\":\"10.0.0.0:7\"")) << json;
}

TEST(SchedulerCoreTest, StatusJsonShowsEachWorkersProgressAndTheJobsSpeed) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  Form(&core);
  WorkerProgress p0{120, 1, 500.0, 0.064, 0.25, 0.75};
  WorkerProgress p1{118, 1, 450.0, 0.071, 0.3, 0.8};
  core.Heartbeat(MemberRole::kWorker, 0, &p0);
  core.Heartbeat(MemberRole::kWorker, 1, &p1);
  core.Heartbeat(MemberRole::kShard, 0);
  const nlohmann::json j = nlohmann::json::parse(core.StatusJson());
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_DOUBLE_EQ(j["images_per_second"].get<double>(), 950.0);
  ASSERT_EQ(j["members"].size(), 3u);
  const nlohmann::json& w1 = j["members"][2];
  EXPECT_EQ(w1["role"], "worker");
  EXPECT_EQ(w1["rank"], 1);
  EXPECT_EQ(w1["state"], "alive");
  EXPECT_EQ(w1["progress"]["step"], 118);
  EXPECT_DOUBLE_EQ(w1["progress"]["images_per_second"].get<double>(), 450.0);
  EXPECT_DOUBLE_EQ(w1["progress"]["communication_overhead"].get<double>(), 0.3);
  EXPECT_FALSE(j["members"][0].contains("progress"));  // the shard
}

TEST(SchedulerCoreTest, SnapshotCountsMembersByStateMissedHeartbeatsAndBarrierWaits) {
  FakeClock clock;
  SchedulerCore core(Spec(2, 1), &clock);
  SchedulerSnapshot s = core.TakeSnapshot();
  EXPECT_EQ(s.state, JobState::kForming);
  EXPECT_EQ(s.members[static_cast<int>(MemberRole::kWorker)][static_cast<int>(MemberState::kMissing)], 2);
  Form(&core);

  // A 1 s silence at 250 ms per beat: 3 beats missed (the 4th may be on its way), counted by
  // the next heartbeat or, while the member is silent, by the liveness check.
  clock.Advance(absl::Seconds(1));
  core.Heartbeat(MemberRole::kShard, 0);
  core.Heartbeat(MemberRole::kWorker, 1);
  core.CheckLiveness();  // worker 0 is still silent
  core.Heartbeat(MemberRole::kWorker, 0);
  core.CheckLiveness();
  clock.Advance(absl::Milliseconds(100));
  core.CheckLiveness();

  std::thread waiter([&] { ASSERT_TRUE(core.Barrier(0, "epoch", 0).ok()); });
  absl::SleepFor(absl::Milliseconds(20));
  clock.Advance(absl::Milliseconds(700));
  ASSERT_TRUE(core.Barrier(1, "epoch", 0).ok());
  waiter.join();

  core.MemberStopped(MemberRole::kWorker, 1, "");
  s = core.TakeSnapshot();
  const int shard = static_cast<int>(MemberRole::kShard);
  const int worker = static_cast<int>(MemberRole::kWorker);
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.missed_heartbeats[worker], 6);
  EXPECT_EQ(s.missed_heartbeats[shard], 3);
  EXPECT_EQ(s.members[worker][static_cast<int>(MemberState::kAlive)], 1);
  EXPECT_EQ(s.members[worker][static_cast<int>(MemberState::kStopped)], 1);
  EXPECT_EQ(s.members[shard][static_cast<int>(MemberState::kAlive)], 1);
  ASSERT_EQ(s.barrier_waits.size(), 1u);
  EXPECT_EQ(s.barrier_waits[0], absl::Milliseconds(700));
  EXPECT_TRUE(core.TakeSnapshot().barrier_waits.empty());  // taken once

  core.ControlStreamEnded(MemberRole::kShard, 0, "connection lost");
  s = core.TakeSnapshot();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.members[shard][static_cast<int>(MemberState::kDead)], 1);
}

MemberRegistration WorkerOn(const std::string& host, int threads, int cores) {
  MemberRegistration r;
  r.role = MemberRole::kWorker;
  r.host = host;
  r.threads = threads;
  r.cores = cores;
  return r;
}

TEST(SchedulerCoreTest, SaysOnceWhenTheWorkersOfAHostTakeMoreThreadsThanItsCores) {
  FakeClock clock;
  SchedulerCore core(Spec(4, 1), &clock);
  ASSERT_TRUE(core.Register(WorkerOn("a", 2, 2)).ok());
  ASSERT_TRUE(core.Register(WorkerOn("b", 2, 2)).ok());  // one per host: fine
  EXPECT_TRUE(core.TakeNotices().empty());
  ASSERT_TRUE(core.Register(WorkerOn("a", 2, 2)).ok());
  const std::vector<std::string> notices = core.TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0],
            "host a: workers 0, 2 run 4 compute threads on its 2 cores and will slow each other "
            "down; give each OMP_NUM_THREADS=1 (the launcher does), or start fewer workers there");
  ASSERT_TRUE(core.Register(WorkerOn("a", 2, 2)).ok());
  EXPECT_TRUE(core.TakeNotices().empty()) << "said once per host";
}

TEST(SchedulerCoreTest, WorkersSharingTheCoresOrNotSayingAreNoNotice) {
  FakeClock clock;
  SchedulerCore core(Spec(3, 1), &clock);
  ASSERT_TRUE(core.Register(WorkerOn("a", 1, 2)).ok());
  ASSERT_TRUE(core.Register(WorkerOn("a", 1, 2)).ok());  // the launcher's share
  ASSERT_TRUE(core.Register(WorkerOn("a", 0, 0)).ok());  // a program that does not say
  EXPECT_TRUE(core.TakeNotices().empty());
}

}  // namespace
}  // namespace cohort
