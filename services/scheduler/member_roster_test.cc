#include "services/scheduler/member_roster.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

MemberRegistration Registration(MemberRole role, const std::string& host, int64_t pid,
                                const std::string& address = "") {
  MemberRegistration r;
  r.role = role;
  r.host = host;
  r.pid = pid;
  r.address = address;
  return r;
}

TEST(MemberRosterTest, FindsOnlyRegisteredMembersAndTheirOwnProcess) {
  MemberRoster roster(1, 2, absl::Milliseconds(250));
  EXPECT_EQ(roster.Find(MemberRole::kWorker, 1), nullptr);
  EXPECT_EQ(roster.Find(MemberRole::kWorker, 2), nullptr);  // no such rank
  EXPECT_FALSE(roster.AllRegistered());
  EXPECT_EQ(roster.Unregistered(), (std::vector<std::string>{"shard 0", "worker 0", "worker 1"}));

  roster.Enroll(roster.workers()[1], Registration(MemberRole::kWorker, "h1", 42), kStart);
  ASSERT_NE(roster.Find(MemberRole::kWorker, 1), nullptr);
  EXPECT_NE(roster.FindProcess(MemberRole::kWorker, 1, 42), nullptr);
  EXPECT_NE(roster.FindProcess(MemberRole::kWorker, 1, 0), nullptr);   // 0: any process
  EXPECT_EQ(roster.FindProcess(MemberRole::kWorker, 1, 43), nullptr);  // a replaced process
  EXPECT_EQ(roster.Describe(MemberRole::kWorker, 1), "worker 1 (host h1, pid 42)");
  EXPECT_EQ(roster.Unregistered(), (std::vector<std::string>{"shard 0", "worker 0"}));

  roster.Enroll(roster.shards()[0], Registration(MemberRole::kShard, "h1", 7), kStart);
  roster.Enroll(roster.workers()[0], Registration(MemberRole::kWorker, "h1", 41), kStart);
  EXPECT_TRUE(roster.AllRegistered());
  EXPECT_EQ(roster.AddWorker(), 2);
  EXPECT_FALSE(roster.AllRegistered());
}

TEST(MemberRosterTest, TakesOverWhatAJournalSays) {
  MemberRoster roster(2, 2, absl::Milliseconds(250));
  roster.FinishedBefore(1, "h", 42, kStart);
  roster.FinishedBefore(5, "h", 43, kStart);  // not a rank of this job
  roster.DeadBefore(0);
  roster.DeadBefore(-1);
  EXPECT_EQ(MemberRoster::StateOf(roster.workers()[1]), MemberState::kStopped);
  EXPECT_EQ(roster.Describe(MemberRole::kWorker, 1), "worker 1 (host h, pid 42)");
  EXPECT_EQ(MemberRoster::StateOf(roster.shards()[0]), MemberState::kDead);
  EXPECT_EQ(roster.DeadShards(), std::vector<int>{0});
  EXPECT_EQ(roster.Unregistered(), (std::vector<std::string>{"shard 1", "worker 0"}));
  EXPECT_FALSE(roster.AnyShardRestarting());
  roster.shards()[1].restarting = true;
  EXPECT_TRUE(roster.AnyShardRestarting());
}

TEST(MemberRosterTest, CountsEachMissedHeartbeatOnce) {
  MemberRoster roster(1, 1, absl::Milliseconds(250));
  MemberRoster::Member& w = roster.workers()[0];
  roster.Enroll(w, Registration(MemberRole::kWorker, "h", 1), kStart);
  EXPECT_FALSE(roster.AnyStreamOpen());
  // 1 s of silence: four beats were due, one may be on its way.
  roster.CountMissedHeartbeats(MemberRole::kWorker, w, kStart + absl::Seconds(1));
  roster.CountMissedHeartbeats(MemberRole::kWorker, w, kStart + absl::Seconds(1));
  EXPECT_EQ(roster.missed_heartbeats(MemberRole::kWorker), 3);
  WorkerProgress progress;
  progress.step = 9;
  roster.Heard(MemberRole::kWorker, w, kStart + absl::Milliseconds(1250), &progress);
  EXPECT_EQ(roster.missed_heartbeats(MemberRole::kWorker), 4);
  EXPECT_EQ(roster.missed_heartbeats(MemberRole::kShard), 0);
  EXPECT_TRUE(roster.AnyStreamOpen());
  const std::vector<MemberStatus> statuses = roster.Statuses(kStart + absl::Seconds(2));
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].state, MemberState::kMissing);
  EXPECT_EQ(statuses[0].seconds_since_heartbeat, -1);
  EXPECT_EQ(statuses[1].state, MemberState::kAlive);
  EXPECT_DOUBLE_EQ(statuses[1].seconds_since_heartbeat, 0.75);
  ASSERT_TRUE(statuses[1].progress.has_value());
  EXPECT_EQ(statuses[1].progress->step, 9);
}

TEST(MemberRosterTest, RefusesALoopbackShardInAJobOnSeveralHosts) {
  MemberRoster roster(2, 1, absl::Milliseconds(250));
  roster.Enroll(roster.workers()[0], Registration(MemberRole::kWorker, "b", 1), kStart);
  // Alone on its host with a worker elsewhere: nobody could dial 127.0.0.1.
  const absl::Status refused =
      roster.CheckReachable(Registration(MemberRole::kShard, "a", 2, "127.0.0.1:5000"), 0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("--advertise_address"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("worker 0 (host b, pid 1)"), std::string::npos) << refused;
  EXPECT_TRUE(
      roster.CheckReachable(Registration(MemberRole::kShard, "b", 2, "127.0.0.1:5000"), 0).ok());
  // A worker on another host than a loopback shard already in.
  roster.Enroll(roster.shards()[1], Registration(MemberRole::kShard, "b", 3, "127.0.0.1:5001"),
                kStart);
  EXPECT_FALSE(roster.CheckReachable(Registration(MemberRole::kWorker, "c", 4), 1).ok());
}

TEST(MemberRosterTest, SaysOnceThatAHostsWorkersRunMoreThreadsThanItHasCores) {
  MemberRoster roster(1, 3, absl::Milliseconds(250));
  for (int rank : {0, 1}) {
    MemberRegistration r = Registration(MemberRole::kWorker, "h", 10 + rank);
    r.threads = 2;
    r.cores = 2;
    roster.Enroll(roster.workers()[rank], r, kStart);
  }
  const std::optional<std::string> notice = roster.OversubscribedNotice("h");
  ASSERT_TRUE(notice.has_value());
  EXPECT_NE(notice->find("workers 0, 1 run 4 compute threads on its 2 cores"), std::string::npos)
      << *notice;
  EXPECT_NE(notice->find("OMP_NUM_THREADS=1"), std::string::npos) << *notice;
  EXPECT_FALSE(roster.OversubscribedNotice("h").has_value());
  EXPECT_FALSE(roster.OversubscribedNotice("elsewhere").has_value());
}

TEST(MemberRosterTest, GroupsWorkersByHostKeyUntilAMemberEnrolls) {
  MemberRoster roster(1, 3, absl::Milliseconds(250));
  for (int rank : {0, 1, 2}) {
    MemberRegistration r = Registration(MemberRole::kWorker, "h", rank);
    r.host_key = rank == 1 ? "" : "k";
    roster.Enroll(roster.workers()[rank], r, kStart);
  }
  const std::vector<int> active = {0, 1, 2};
  const std::shared_ptr<const HostGroups> groups = roster.GroupsByHost(active);
  EXPECT_EQ(groups->at(0).leader, 0);
  EXPECT_EQ(groups->at(0).workers, 2);
  EXPECT_EQ(groups->at(2).leader, 0);
  EXPECT_EQ(groups->at(1).leader, 1);
  EXPECT_EQ(groups->at(1).workers, 1);
  EXPECT_EQ(roster.GroupsByHost(active), groups);  // kept
  const std::vector<int> without_0 = {1, 2};
  EXPECT_EQ(roster.GroupsByHost(without_0), groups);  // until forgotten: a new generation
  roster.ForgetHostGroups();
  EXPECT_EQ(roster.GroupsByHost(without_0)->at(2).leader, 2);
}

TEST(MemberRosterTest, TheSlowestIsAnAliveWorkerWithProgress) {
  MemberRoster roster(1, 3, absl::Milliseconds(250));
  for (int rank : {0, 1, 2}) {
    MemberRoster::Member& w = roster.workers()[rank];
    roster.Enroll(w, Registration(MemberRole::kWorker, "h", rank), kStart);
    WorkerProgress progress;
    progress.step_seconds = 1.0 + rank;
    roster.Heard(MemberRole::kWorker, w, kStart, &progress);
  }
  ASSERT_TRUE(roster.Slowest().has_value());
  EXPECT_EQ(roster.Slowest()->rank, 2);
  roster.workers()[2].dead = true;
  EXPECT_EQ(roster.Slowest()->rank, 1);
  roster.workers()[1].stopped = true;
  EXPECT_FALSE(roster.Slowest().has_value());  // one worker left
}

}  // namespace
}  // namespace cohort
