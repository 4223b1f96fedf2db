#include "services/scheduler/scheduler_core.h"

#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/fake_clock.h"
#include "services/membership/job_membership.h"

namespace cohort {
namespace {

JobSpec Spec(int workers, int shards) {
  JobSpec s;
  s.job_id = "job-test";
  s.num_workers = workers;
  s.num_shards = shards;
  return s;
}

MemberRegistration Member(MemberRole role, int rank, const std::string& address = "") {
  MemberRegistration r;
  r.role = role;
  r.requested_rank = rank;
  r.host = "host-" + std::to_string(rank);
  r.pid = 1000 + rank;
  r.address = address;
  return r;
}

// Registers S shards and W workers with their own ranks.
void Form(SchedulerCore* core) {
  for (int s = 0; s < core->spec().num_shards; ++s) {
    ASSERT_TRUE(core->Register(Member(MemberRole::kShard, s, "10.0.0." + std::to_string(s) + ":7")).ok());
  }
  for (int w = 0; w < core->spec().num_workers; ++w) {
    ASSERT_TRUE(core->Register(Member(MemberRole::kWorker, w)).ok());
  }
}

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

namespace cohort {
namespace {

JobSpec Elastic(int workers, int min_workers, int max_workers) {
  JobSpec s = Spec(workers, 1);
  s.elastic = true;
  s.min_workers = min_workers;
  s.max_workers = max_workers;
  return s;
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
  EXPECT_EQ(core.WaitForCluster()->workers, (std::vector<int>{0, 2, 3}));
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
  EXPECT_TRUE(absl::StrContains(core.reason(), "1 workers are left, fewer than --min_workers=2"))
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

TEST(SchedulerCoreTest, StopEndsTheJobWithTheReasonGiven) {
  FakeClock clock;
  SchedulerCore core(Elastic(2, 1, 2), &clock);
  Form(&core);
  core.Stop("the scheduler was stopped by SIGTERM");
  EXPECT_EQ(core.state(), JobState::kFailed);
  EXPECT_EQ(core.reason(), "the scheduler was stopped by SIGTERM");
  EXPECT_TRUE(core.WaitUntilEnded(absl::ZeroDuration()));
}

}  // namespace
}  // namespace cohort
