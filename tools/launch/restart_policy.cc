#include "tools/launch/restart_policy.h"

#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "tools/launch/child_process.h"

namespace cohort::launch {
namespace {

using Action = RestartDecision::Action;

std::string GiveUp(const MemberEnd& end, int restarts, absl::string_view flag) {
  return absl::StrCat(end.description, " ", DescribeWaitStatus(end.wait_status),
                      "; it was restarted ", restarts, " times already, the most ", flag,
                      " allows: the job fails");
}

}  // namespace

RestartDecision RestartPolicy::OnEnd(const MemberEnd& end, absl::string_view scheduler_address) {
  if (!WIFSIGNALED(end.wait_status) || end.remote) return {};
  switch (end.role) {
    case Role::kScheduler:
      return Scheduler(end, scheduler_address);
    case Role::kShard:
      return Shard(end);
    case Role::kWorker:
      return Worker(end);
  }
  return {};
}

RestartDecision RestartPolicy::Scheduler(const MemberEnd& end,
                                         absl::string_view scheduler_address) {
  if (!rules_.restart_scheduler) return {};
  if (scheduler_restarts_ >= rules_.max_scheduler_restarts) {
    return {Action::kGiveUp, -1, GiveUp(end, scheduler_restarts_, "--restart_scheduler")};
  }
  ++scheduler_restarts_;
  return {Action::kRestart, -1,
          absl::StrCat(end.description, " ", DescribeWaitStatus(end.wait_status),
                       "; restarting it at ", scheduler_address, " (restart ",
                       scheduler_restarts_, " of at most ", rules_.max_scheduler_restarts, ")")};
}

RestartDecision RestartPolicy::Shard(const MemberEnd& end) {
  if (!rules_.restart_failed_shards) return {};
  int& restarts = shard_restarts_[end.rank];
  if (restarts >= rules_.max_shard_restarts) {
    return {Action::kGiveUp, -1, GiveUp(end, restarts, "--restart_failed_shards")};
  }
  ++restarts;
  return {Action::kRestart, -1,
          absl::StrCat(end.description, " ", DescribeWaitStatus(end.wait_status),
                       "; restarting it from the newest complete checkpoint in ",
                       rules_.checkpoint_dir, " (restart ", restarts, " of at most ",
                       rules_.max_shard_restarts, ")")};
}

RestartDecision RestartPolicy::Worker(const MemberEnd& end) {
  if (!rules_.elastic) return {};
  std::string message = absl::StrCat(end.description, " ", DescribeWaitStatus(end.wait_status),
                                     "; the job goes on without it (--on_worker_failure=elastic)");
  if (!rules_.restart_failed_workers) return {Action::kGoOnWithout, -1, std::move(message)};
  if (worker_restarts_ >= rules_.max_worker_restarts) {
    absl::StrAppend(&message, "; no new worker: --restart_failed_workers starts at most ",
                    rules_.max_worker_restarts, " in all");
    return {Action::kGoOnWithout, -1, std::move(message)};
  }
  const int new_worker = rules_.num_workers + worker_restarts_++;
  absl::StrAppend(&message, "; starting worker ", new_worker, " to join it");
  return {Action::kRestart, new_worker, std::move(message)};
}

}  // namespace cohort::launch
