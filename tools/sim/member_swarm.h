#ifndef COHORT_TOOLS_SIM_MEMBER_SWARM_H_
#define COHORT_TOOLS_SIM_MEMBER_SWARM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/transport_security.h"
#include "services/membership/member_session.h"
#include "trainer/kvstore/kvstore.h"

namespace cohort::sim {

struct SwarmOptions {
  std::string scheduler_address;  // host:port
  int workers = 0;
  int shards = 0;  // they register with an address no worker dials: no data path
  int threads = 32;  // registering and leaving in parallel
  // Workers a simulated host holds (ranks in order; 1: every worker a host of its own): they
  // meet at a barrier there before one of them arrives for all, as a host's processes do.
  int workers_per_host = 8;
  std::shared_ptr<const TransportSecurity> security = TransportSecurity::Plaintext();
};

// Many members of one job in one process, over the real scheduler's gRPC service: each is a
// MemberSession of its own (its registration, control stream and heartbeats), as a shard or
// worker process would hold it; the job's control plane at a size no machine here could run
// as processes. Calls come from one thread.
class MemberSwarm {
 public:
  // Registers every shard, then every worker, `threads` at a time; returns once all have.
  static absl::StatusOr<std::unique_ptr<MemberSwarm>> Join(const SwarmOptions& options);
  ~MemberSwarm();  // members not left yet leave as failed

  // Until every worker has seen the job RUNNING with every shard up.
  absl::Status WaitUntilRunning(absl::Duration timeout);
  // `rounds` barriers of every worker at once (each call asynchronous, as from processes of
  // their own: no thread of this one waits in it); for each, the time from the last worker's
  // arrival to the last one's release.
  absl::StatusOr<std::vector<absl::Duration>> Barriers(int rounds);
  // An elastic job: one worker vanishes as a killed process does; the time until every other
  // worker has heard of the generation that follows.
  absl::StatusOr<absl::Duration> KillAWorker();
  // An elastic job: a new worker joins; the time until every worker has heard of the generation
  // that follows.
  absl::StatusOr<absl::Duration> JoinAWorker();
  // An elastic job: a worker in a process of its own (`argv` starts it) joins; it then stops
  // as a hung process does (SIGSTOP: its connections stay open, its heartbeats stop) while
  // every other worker waits for it at a barrier. The time from its stop until the scheduler
  // let them go on into the next generation; the process is killed after.
  absl::StatusOr<absl::Duration> HangAWorker(const std::vector<std::string>& argv);
  // The data path, against the job's real shard processes: every worker opens a dist_sync
  // store, and `steps` times pushes -1 for every element of `keys` keys of `elements` each; the
  // shards run plain SGD at rate 1, so after step s every element of every answer must be s + 1
  // (an error names the first that is not).
  struct CountedSteps {
    absl::Duration took;
    // When each worker had its step's answers, after the first worker had them: the spread
    // of each step (last − first), and each worker's mean lateness (by worker).
    std::vector<absl::Duration> spreads;
    std::vector<absl::Duration> lateness;
  };
  absl::StatusOr<CountedSteps> CountSteps(int steps, int keys, int64_t elements);
  // Every worker leaves as finished (the job ends DONE), then every shard once it heard so.
  absl::Status FinishJob(absl::Duration timeout);

 private:
  explicit MemberSwarm(SwarmOptions options, std::shared_ptr<HostMeetings> meetings)
      : options_(std::move(options)), meetings_(std::move(meetings)) {}
  // A worker's session options, on the simulated host of the worker with this index.
  MemberSessionOptions WorkerOptions(int index) const;
  // Runs f(i) for i in [0, n) on `threads` threads; the first error.
  absl::Status ForEach(int n, int threads, const std::function<absl::Status(int)>& f) const;
  // Every worker still there calls the barrier `name` at once (in its generation); once every
  // answer came, the times of the last call and the last answer, and each worker's answer.
  struct BarrierRound {
    absl::Time last_call;
    absl::Time last_answer;
    std::vector<absl::StatusOr<uint64_t>> answers;  // by worker; none for one vanished
  };
  absl::StatusOr<BarrierRound> BarrierOfAll(const std::string& name) const;
  // Until every worker still there has heard of a generation past `generation`.
  absl::StatusOr<absl::Duration> WaitPastGeneration(int64_t generation, absl::Time since) const;

  const SwarmOptions options_;
  const std::shared_ptr<HostMeetings> meetings_;  // every simulated host's, on one thread
  std::vector<std::unique_ptr<MemberSession>> shards_;
  std::vector<std::unique_ptr<MemberSession>> workers_;  // null once vanished
  std::vector<std::unique_ptr<KVStore>> stores_;  // CountSteps's, by worker; before workers_ go
};

}  // namespace cohort::sim

#endif  // COHORT_TOOLS_SIM_MEMBER_SWARM_H_
