#ifndef COHORT_TOOLS_LAUNCH_SUPERVISOR_H_
#define COHORT_TOOLS_LAUNCH_SUPERVISOR_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/launch/job_env.h"
#include "tools/launch/restart_policy.h"

namespace cohort::launch {

// One member of a job as the supervisor sees it.
struct MemberStatus {
  Role role = Role::kWorker;
  int rank = 0;
  std::string name;         // "scheduler", "shard 0", "worker 1"
  std::string description;  // for messages: "worker 1 (pid 7)"
  bool remote = false;
  std::optional<int> wait_status;  // once it ended and was reaped
};

// The job's processes, as the supervisor acts on them. Members are numbered in the order they
// were started, the scheduler first; a number keeps naming its process.
class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  virtual std::vector<MemberStatus> Members() const = 0;
  // Asks a running member to stop: SIGTERM to its process group, or for a remote member the end
  // of its stdin (its wrapper stops it and its last output still comes back).
  virtual void Stop(int member) = 0;
  // SIGKILL to a running member's process group.
  virtual void Kill(int member) = 0;
};

struct SupervisorOptions {
  std::string job_id;
  int num_workers = 1;
  bool elastic = false;  // the job is done when every worker ended and one finished
  double linger_s = 0;   // the scheduler serves its status this long after the job ends
  bool remote = false;   // members on other hosts: their wrappers need longer to stop them
  absl::Duration start_timeout = absl::Seconds(30);  // for the scheduler's port file
  std::string scheduler_port_file;                   // for messages
  // Whether the scheduler recorded the job DONE (its journal): a shard or scheduler that ends
  // after that, however, leaves the job's result as it is.
  std::function<bool()> job_done = [] { return false; };
  // Why the scheduler recorded the job FAILED (its journal; "" when it did not): the launcher's
  // last line says it too, so that both verdicts read the same. Read before the launcher stops
  // the members: a scheduler it stopped records only that.
  std::function<std::string()> failure_reason = [] { return std::string(); };
};

// Which members to start again.
struct Restarts {
  bool scheduler = false;
  std::vector<int> shards;  // ranks
  struct NewWorker {
    int number = 0;    // the launcher's number of the new worker
    int replaces = 0;  // the number of the dead one (the new one takes its host)
  };
  std::vector<NewWorker> workers;
};

// The job's course, without processes or a clock of its own: the caller reports what happened
// (a member ended, a signal, the scheduler listens) with the time, and calls Tick so deadlines
// pass; the supervisor decides when the job fails, which members restart (RestartPolicy), and
// when the others are asked to stop and then killed, through the ProcessTable.
// Ending: when a process fails, the others get linger + 3 s to end on their own (the scheduler
// tells them to stop; linger + 6 s after the scheduler failed, so members first wait out their
// grace for it); when every worker has exited 0, the scheduler and shards get linger + 10 s.
// Then each remaining member is stopped and, 2 s later (4 s with remote members), killed.
// SIGINT or SIGTERM stops them at once and kills them 5 s later (a second one: at once).
// Not thread-safe: the launcher's main thread owns it.
class Supervisor {
 public:
  Supervisor(SupervisorOptions options, RestartPolicy policy, ProcessTable& table,
             std::function<void(absl::string_view)> say)
      : o_(std::move(options)), policy_(std::move(policy)), table_(table), say_(std::move(say)) {}

  // Waiting for the scheduler's port file (since Start), and every member started.
  bool starting() const { return phase_ == Phase::kStarting; }
  bool running() const { return phase_ == Phase::kRunning; }
  // When Tick next has something to do.
  std::optional<absl::Time> deadline() const { return deadline_; }

  // The scheduler was started: it has start_timeout to write its port file.
  void Start(absl::Time now);
  // The scheduler listens at `address` and every other member was started.
  void Run(std::string scheduler_address);
  // Member `member` of the table has ended (its wait status is in the table).
  void OnEnd(int member, absl::Time now);
  void OnSignal(int sig, absl::Time now);
  // Stops the job now: something it needs went wrong (the launcher said what).
  void Abort(absl::Time now);
  // Acts on a deadline that has passed.
  void Tick(absl::Time now);
  // The members OnEnd chose to start again since the last call; none once the job is ending.
  Restarts TakeRestarts();
  // Once every member ended: says how the job ended and returns the launcher's exit status:
  // 0, the first failure's exit code, or 128 + the signal that interrupted it.
  int Finish();

 private:
  enum class Phase {
    kStarting,     // the scheduler runs; waiting for its port file
    kRunning,      // everyone started
    kEnding,       // a process failed or the workers finished: the others end on their own
    kTerminating,  // stop asked
    kKilling,      // SIGKILL sent
  };

  void Failed(const MemberStatus& m, absl::Time now);
  bool AllWorkersSucceeded(const std::vector<MemberStatus>& members) const;
  void Fail(int exit_code, std::string why, absl::Duration extra, absl::Time now);
  void EndWithin(absl::Duration extra, std::string why, absl::Time now);
  void Terminate(absl::Duration grace, absl::Time now);
  void Kill();
  std::vector<int> Running() const;
  std::string NamesOf(const std::vector<int>& members) const;
  void Say(absl::string_view message) const { say_(message); }

  const SupervisorOptions o_;
  RestartPolicy policy_;
  ProcessTable& table_;
  const std::function<void(absl::string_view)> say_;
  std::string scheduler_address_;
  Phase phase_ = Phase::kStarting;
  std::optional<absl::Time> deadline_;  // of the current phase
  absl::Duration ending_wait_;          // how long the job has to end on its own
  std::string ending_why_;              // why, for messages
  std::optional<int> failure_;          // the job's exit status once something failed
  std::optional<std::string> verdict_;  // the scheduler's, before any member was stopped
  int interrupted_ = 0;                 // the signal that interrupted the launcher
  Restarts restarts_;
};

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_SUPERVISOR_H_
