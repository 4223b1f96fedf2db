#include "tools/launch/restart_policy.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

using Action = RestartDecision::Action;
using ::testing::HasSubstr;

constexpr int kKilled = SIGKILL;    // a waitpid status: killed by SIGKILL
constexpr int kExited1 = 1 << 8;    // exited with status 1

MemberEnd End(Role role, int rank, int wait_status, bool remote = false) {
  const std::string name =
      role == Role::kScheduler ? "scheduler" : absl::StrCat(RoleName(role), " ", rank);
  return {role, rank, absl::StrCat(name, " (pid 7)"), remote, wait_status};
}

TEST(RestartPolicyTest, WithoutRulesNothingIsSurvived) {
  RestartPolicy policy({});
  for (Role role : {Role::kScheduler, Role::kShard, Role::kWorker}) {
    const RestartDecision d = policy.OnEnd(End(role, 0, kKilled), "127.0.0.1:9000");
    EXPECT_EQ(d.action, Action::kNone);
    EXPECT_EQ(d.message, "");
  }
}

// --shard_replicas=2: a dead shard's backup leads its parts; the job goes on without it, here
// or on a host that is gone.
TEST(RestartPolicyTest, AReplicatedJobGoesOnWithoutADeadShard) {
  RestartRules rules;
  rules.shard_replicas = 2;
  RestartPolicy policy(rules);
  const RestartDecision d = policy.OnEnd(End(Role::kShard, 1, kKilled), "");
  EXPECT_EQ(d.action, Action::kGoOnWithout);
  EXPECT_THAT(d.message, HasSubstr("shard 1 (pid 7) was killed by signal 9 (Killed); its backup "
                                   "leads its parts (--shard_replicas=2): the job goes on "
                                   "without it"));
  const RestartDecision gone = policy.OnEnd(End(Role::kShard, 0, 255 << 8, true), "");
  EXPECT_EQ(gone.action, Action::kGoOnWithout);
  EXPECT_THAT(gone.message, HasSubstr("its backup leads its parts: the job goes on without it"));
  EXPECT_EQ(policy.OnEnd(End(Role::kWorker, 0, kKilled), "").action, Action::kNone);
}

// --shard_replicas=2 --restart_failed_shards: a dead shard comes back as the backup of the
// shares left without one, as often as the limit allows; after that the job goes on without it.
TEST(RestartPolicyTest, AReplicatedJobRestartsADeadShardAsABackupUpToTheLimit) {
  RestartRules rules;
  rules.shard_replicas = 2;
  rules.restart_failed_shards = true;
  rules.max_shard_restarts = 1;
  RestartPolicy policy(rules);
  const RestartDecision d = policy.OnEnd(End(Role::kShard, 1, kKilled), "");
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_THAT(d.message, HasSubstr("its backup leads its parts (--shard_replicas=2); restarting "
                                   "it to back up the shares left without a backup, copied "
                                   "from their leaders (restart 1 of at most 1)"));
  const RestartDecision again = policy.OnEnd(End(Role::kShard, 1, kKilled), "");
  EXPECT_EQ(again.action, Action::kGoOnWithout);
  EXPECT_THAT(again.message, HasSubstr("it was restarted 1 times already, the most "
                                       "--restart_failed_shards allows: the job goes on without "
                                       "it"));
}

TEST(RestartPolicyTest, OnlyADeathIsRestarted) {
  RestartRules rules;
  rules.restart_failed_shards = true;
  rules.restart_scheduler = true;
  RestartPolicy policy(rules);
  EXPECT_EQ(policy.OnEnd(End(Role::kShard, 0, kExited1), "").action, Action::kNone);
  EXPECT_EQ(policy.OnEnd(End(Role::kShard, 0, 0), "").action, Action::kNone);
  EXPECT_EQ(policy.OnEnd(End(Role::kScheduler, 0, kExited1), "").action, Action::kNone);
  EXPECT_EQ(policy.OnEnd(End(Role::kShard, 0, kKilled), "").action, Action::kRestart);
}

// A remote member's end comes as ssh's exit status: the wrapper's 128 + N for a death there.
TEST(RestartPolicyTest, ARemoteDeathIsRestartedAndAHostGoneIsSaid) {
  RestartRules rules;
  rules.restart_failed_shards = true;
  rules.checkpoint_dir = "/ckpt";
  RestartPolicy policy(rules);
  const auto remote = [](int exit_code) {
    return End(Role::kShard, 2, exit_code << 8, /*remote=*/true);
  };
  RestartDecision d = policy.OnEnd(remote(128 + SIGKILL), "");
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.message, "shard 2 (pid 7) was killed by signal 9 (Killed); restarting it from the "
                       "newest complete checkpoint in /ckpt (restart 1 of at most 3)");
  EXPECT_EQ(policy.OnEnd(remote(128 + SIGSEGV), "").action, Action::kRestart);
  // Its own exit, a stop it answered, ssh killed here: not deaths.
  for (int code : {1, 128 + SIGTERM, 128 + SIGINT}) {
    EXPECT_EQ(policy.OnEnd(remote(code), "").action, Action::kNone) << code;
  }
  EXPECT_EQ(policy.OnEnd(End(Role::kShard, 2, kKilled, /*remote=*/true), "").action,
            Action::kNone);
  d = policy.OnEnd(remote(255), "");
  EXPECT_EQ(d.action, Action::kGiveUp);
  EXPECT_EQ(d.message, "shard 2 (pid 7): ssh lost its host (status 255: the host is down, "
                       "unreachable or refused the login; see above); a member whose host is "
                       "gone is not restarted: the job fails");
  // Without the rule, a lost host is the supervisor's usual failure.
  EXPECT_EQ(RestartPolicy({}).OnEnd(remote(255), "").action, Action::kNone);
}

TEST(RestartPolicyTest, ShardRestartsCountPerRankUpToTheLimit) {
  RestartRules rules;
  rules.restart_failed_shards = true;
  rules.checkpoint_dir = "/ckpt";
  RestartPolicy policy(rules);
  for (int i = 1; i <= kMaxShardRestarts; ++i) {
    const RestartDecision d = policy.OnEnd(End(Role::kShard, 1, kKilled), "");
    EXPECT_EQ(d.action, Action::kRestart);
    EXPECT_EQ(d.message,
              absl::StrCat("shard 1 (pid 7) was killed by signal 9 (Killed); restarting it from "
                           "the newest complete checkpoint in /ckpt (restart ",
                           i, " of at most 3)"));
  }
  // Another rank has its own count.
  EXPECT_EQ(policy.OnEnd(End(Role::kShard, 0, kKilled), "").action, Action::kRestart);

  const RestartDecision given_up = policy.OnEnd(End(Role::kShard, 1, kKilled), "");
  EXPECT_EQ(given_up.action, Action::kGiveUp);
  EXPECT_EQ(given_up.message,
            "shard 1 (pid 7) was killed by signal 9 (Killed); it was restarted 3 times already, "
            "the most --restart_failed_shards allows: the job fails");
}

TEST(RestartPolicyTest, SchedulerRestartsAtItsAddressUpToTheLimit) {
  RestartRules rules;
  rules.restart_scheduler = true;
  rules.max_scheduler_restarts = 1;
  RestartPolicy policy(rules);
  const RestartDecision d = policy.OnEnd(End(Role::kScheduler, 0, kKilled), "127.0.0.1:9000");
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.message,
            "scheduler (pid 7) was killed by signal 9 (Killed); restarting it at 127.0.0.1:9000 "
            "(restart 1 of at most 1)");
  const RestartDecision given_up =
      policy.OnEnd(End(Role::kScheduler, 0, kKilled), "127.0.0.1:9000");
  EXPECT_EQ(given_up.action, Action::kGiveUp);
  EXPECT_THAT(given_up.message, HasSubstr("scheduler (pid 7)"));
  EXPECT_THAT(given_up.message,
              HasSubstr("restarted 1 times already, the most --restart_scheduler allows"));
}

TEST(RestartPolicyTest, ElasticJobsGoOnWithoutADeadWorker) {
  RestartRules rules;
  rules.elastic = true;
  RestartPolicy policy(rules);
  const RestartDecision d = policy.OnEnd(End(Role::kWorker, 2, kKilled), "");
  EXPECT_EQ(d.action, Action::kGoOnWithout);
  EXPECT_EQ(d.message, "worker 2 (pid 7) was killed by signal 9 (Killed); the job goes on "
                       "without it (--on_worker_failure=elastic)");
  // A worker that exits with an error fails the job, elastic or not.
  EXPECT_EQ(policy.OnEnd(End(Role::kWorker, 1, kExited1), "").action, Action::kNone);
}

TEST(RestartPolicyTest, NewWorkersAreNumberedOnUntilTheLimit) {
  RestartRules rules;
  rules.elastic = true;
  rules.restart_failed_workers = true;
  rules.num_workers = 3;
  rules.max_worker_restarts = 2;
  RestartPolicy policy(rules);
  RestartDecision d = policy.OnEnd(End(Role::kWorker, 0, kKilled), "");
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.new_worker, 3);
  EXPECT_THAT(d.message, HasSubstr("goes on without it (--on_worker_failure=elastic); starting "
                                   "worker 3 to join it"));
  EXPECT_EQ(policy.OnEnd(End(Role::kWorker, 3, kKilled), "").new_worker, 4);
  d = policy.OnEnd(End(Role::kWorker, 1, kKilled), "");
  EXPECT_EQ(d.action, Action::kGoOnWithout);
  EXPECT_THAT(d.message,
              HasSubstr("; no new worker: --restart_failed_workers starts at most 2 in all"));
}

}  // namespace
}  // namespace cohort::launch
