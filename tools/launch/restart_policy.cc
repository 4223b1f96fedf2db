#include "tools/launch/restart_policy.h"

#include <signal.h>
#include <sys/wait.h>

#include <optional>

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

// ssh's own exit status: it could not reach the host, or lost the connection to it.
constexpr int kSshFailed = 255;

// The signal that killed a remote member, as its wrapper reports it through ssh (128 + N, the
// shell's way); none for an exit, for a stop it answered (SIGTERM, SIGINT, SIGHUP: its own exit
// status), a broken pipe, or ssh's own failure.
std::optional<int> RemoteDeathSignal(int wait_status) {
  if (!WIFEXITED(wait_status)) return std::nullopt;  // ssh itself was signalled here
  const int code = ExitCodeOf(wait_status);
  if (code <= 128 || code >= kSshFailed) return std::nullopt;
  const int sig = code - 128;
  if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGPIPE) return std::nullopt;
  return sig;
}

}  // namespace

RestartDecision RestartPolicy::OnEnd(const MemberEnd& end, absl::string_view scheduler_address) {
  MemberEnd death = end;
  if (end.remote) {
    if (WIFEXITED(end.wait_status) && ExitCodeOf(end.wait_status) == kSshFailed) {
      return HostGone(end);
    }
    const std::optional<int> sig = RemoteDeathSignal(end.wait_status);
    if (!sig.has_value()) return {};
    death.wait_status = *sig;  // said as the signal that killed it there
  } else if (!WIFSIGNALED(end.wait_status)) {
    return {};
  }
  switch (end.role) {
    case Role::kScheduler:
      return Scheduler(death, scheduler_address);
    case Role::kShard:
      return Shard(death);
    case Role::kWorker:
      return Worker(death);
  }
  return {};
}

RestartDecision RestartPolicy::HostGone(const MemberEnd& end) {
  const bool restarts = end.role == Role::kShard    ? rules_.restart_failed_shards
                        : end.role == Role::kWorker ? rules_.elastic
                                                    : rules_.restart_scheduler;
  const bool replicated = end.role == Role::kShard && rules_.shard_replicas > 1;
  if (!restarts && !replicated) return {};
  const std::string lost = absl::StrCat(
      end.description, ": ssh lost its host (status 255: the host is down, unreachable or "
      "refused the login; see above)");
  if (replicated) {
    return {Action::kGoOnWithout, -1,
            absl::StrCat(lost, "; its backup leads its parts: the job goes on without it")};
  }
  if (end.role == Role::kWorker) {
    return {Action::kGoOnWithout, -1,
            absl::StrCat(lost, "; the job goes on without it (--on_worker_failure=elastic)")};
  }
  return {Action::kGiveUp, -1,
          absl::StrCat(lost, "; a member whose host is gone is not restarted: the job fails")};
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
  const bool replicated = rules_.shard_replicas > 1;
  const std::string died = absl::StrCat(end.description, " ", DescribeWaitStatus(end.wait_status));
  const std::string taken =
      absl::StrCat("; its backup leads its parts (--shard_replicas=", rules_.shard_replicas, ")");
  if (!rules_.restart_failed_shards) {
    if (!replicated) return {};
    return {Action::kGoOnWithout, -1, absl::StrCat(died, taken, ": the job goes on without it")};
  }
  int& restarts = shard_restarts_[end.rank];
  if (restarts >= rules_.max_shard_restarts) {
    if (replicated) {
      return {Action::kGoOnWithout, -1,
              absl::StrCat(died, taken, "; it was restarted ", restarts,
                           " times already, the most --restart_failed_shards allows: the job "
                           "goes on without it")};
    }
    return {Action::kGiveUp, -1, GiveUp(end, restarts, "--restart_failed_shards")};
  }
  ++restarts;
  const std::string restart =
      absl::StrCat(" (restart ", restarts, " of at most ", rules_.max_shard_restarts, ")");
  if (replicated) {
    return {Action::kRestart, -1,
            absl::StrCat(died, taken, "; restarting it to back up the shares left without a "
                         "backup, copied from their leaders", restart)};
  }
  return {Action::kRestart, -1,
          absl::StrCat(died, "; restarting it from the newest complete checkpoint in ",
                       rules_.checkpoint_dir, restart)};
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
