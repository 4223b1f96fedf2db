#ifndef COHORT_TOOLS_LAUNCH_RESTART_POLICY_H_
#define COHORT_TOOLS_LAUNCH_RESTART_POLICY_H_

#include <map>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "tools/launch/job_env.h"

namespace cohort::launch {

// How often the launcher starts a member again after it died.
inline constexpr int kMaxSchedulerRestarts = 3;  // --restart_scheduler
inline constexpr int kMaxShardRestarts = 3;      // --restart_failed_shards, per shard rank
inline constexpr int kMaxWorkerRestarts = 100;   // --restart_failed_workers, new workers in all

// Which deaths the job survives (the launcher's flags).
struct RestartRules {
  bool restart_scheduler = false;      // at its address; members register with it again
  bool restart_failed_shards = false;  // from the newest complete checkpoint
  int shard_replicas = 1;  // 2: a dead shard's backup leads its parts, the job goes on
  std::string checkpoint_dir;          // where a restarted shard resumes from
  bool elastic = false;                // a dead worker does not end the job
  bool restart_failed_workers = false;  // elastic: a new worker joins in place of a dead one
  int num_workers = 1;  // the launcher numbers new workers on from here
  int max_scheduler_restarts = kMaxSchedulerRestarts;
  int max_shard_restarts = kMaxShardRestarts;
  int max_worker_restarts = kMaxWorkerRestarts;
};

// A member that ended while the job ran.
struct MemberEnd {
  Role role = Role::kWorker;
  int rank = 0;
  std::string description;  // "shard 1 (pid 7)", "shard 1 on node2 (ssh pid 7)"
  bool remote = false;
  int wait_status = 0;
};

struct RestartDecision {
  enum class Action {
    kNone,         // not a death these rules survive: the job fails, or ends, as without them
    kRestart,      // start it again (a worker: a new one, numbered new_worker)
    kGoOnWithout,  // elastic: the job goes on without the worker
    kGiveUp,       // restarted as often as the rules allow: the job fails
  };
  Action action = Action::kNone;
  int new_worker = -1;  // kRestart of a worker: the launcher's number for the new one
  std::string message;  // what the launcher says about it (empty for kNone)
};

// Decides, for each member that ends while the job runs, whether the job restarts it, goes on
// without it, or gives up, counting restarts per member against the rules' limits. Only a death
// (a signal: SIGKILL, the OOM killer, a crash) is survived: a local process's own, or a remote
// one's as its wrapper reports it through ssh (exit status 128 + N); a process that exits with
// an error (the job failed) is not, nor a remote member whose host is gone (ssh's 255: said,
// and the job fails, or goes on without an elastic job's worker). Pure: no processes, no
// clock. Not thread-safe.
class RestartPolicy {
 public:
  explicit RestartPolicy(RestartRules rules) : rules_(std::move(rules)) {}

  // scheduler_address: host:port, for the scheduler's restart message.
  RestartDecision OnEnd(const MemberEnd& end, absl::string_view scheduler_address);

 private:
  RestartDecision Scheduler(const MemberEnd& end, absl::string_view scheduler_address);
  RestartDecision Shard(const MemberEnd& end);
  RestartDecision Worker(const MemberEnd& end);
  RestartDecision HostGone(const MemberEnd& end);

  const RestartRules rules_;
  int scheduler_restarts_ = 0;
  std::map<int, int> shard_restarts_;  // by rank
  int worker_restarts_ = 0;
};

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_RESTART_POLICY_H_
