#ifndef COHORT_SERVICES_SHARD_SHARD_PROCESS_H_
#define COHORT_SERVICES_SHARD_SHARD_PROCESS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/checkpoint/checkpoint_options.h"
#include "services/common/grpc_util.h"
#include "services/common/metrics.h"
#include "services/membership/leave_on_signal.h"
#include "services/membership/member_session.h"
#include "services/shard/replication/shard_replication.h"
#include "services/shard/shard_checkpointer.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_metrics.h"
#include "services/shard/shard_rollback.h"
#include "services/shard/shard_service.h"
#include "services/shard/shard_set_up.h"
#include "services/shard/shm_session_server.h"

namespace cohort {

// What the shard binary is told (its flags, checked).
struct ShardProcessOptions {
  MemberSessionOptions session;  // its port is the server's, filled in by Start
  std::string bind = "0.0.0.0";  // the service's and /metrics' address
  int port = 0;                  // the service's (0: the system picks one)
  // Offer this host's workers, and the shards leading parts this one backs up, shared memory.
  bool shared_memory = true;
  int metrics_port = 0;
  std::string metrics_port_file;  // where the metrics port is written too ("": nowhere)
  CheckpointOptions checkpoints;  // validated
};

// A parameter shard's process, the counterpart of WorkerProcess: its core and what serves it,
// put together and taken apart in order. Start serves the Shard service (and shared memory),
// joins the job (the rank is known only then, so early calls wait for the set-up, ShardSetUp),
// then sets up: metrics, the resume (--resume: its own share and, with replicated shards, those
// it backs up), the checkpoint writer and, for a shard that came back into a job of replicated
// shards, the copies of the shares it is to back up (it resumes nothing). ServeUntilEnded
// serves /metrics until the job ends.
//
// Taking apart (the destructor; ServeUntilEnded's end): what serves the job stops before what
// it reports to goes. Replication closes first, its shared-memory server with it (the backups'
// leaders hear this shard left, and calls still waiting for the set-up end), then the
// server's handlers and the workers' shared-memory streams, then the checkpoint writer (it
// writes what is queued); the core stops reporting to the metrics, and the member leaves its
// job last. Thread-compatible.
class ShardProcess {
 public:
  // Errors are whole sentences for stderr, naming the shard: a member that joined leaves
  // saying why.
  static absl::StatusOr<std::unique_ptr<ShardProcess>> Start(ShardProcessOptions options);
  ~ShardProcess();

  // Serves /metrics, says where the shard listens, and serves the job until it ends; then
  // leaves it. OK when the job ended well; else why the shard stops (a stop signal that came
  // meanwhile is answered first).
  absl::Status ServeUntilEnded();
  int rank() const { return core_.rank(); }

 private:
  explicit ShardProcess(ShardProcessOptions options);
  // Start's steps after the server is up: join, set up, copy.
  absl::Status Join();
  absl::Status SetUp();
  absl::Status CopyShares();
  void StopServing();

  const ShardProcessOptions options_;
  // The rank is known only after registering, which needs the port: the core and the roll
  // back learn it late, and calls that may come before wait for set_up_.
  ShardCore core_;
  ShardSetUp set_up_;
  ShardRollback rollback_;
  ShardReplication replication_;
  ShardService service_;
  RunningServer server_;
  bool serving_ = false;
  std::unique_ptr<ShmSessionServer> shm_pushes_, shm_backups_;
  std::unique_ptr<MemberSession> session_;
  std::unique_ptr<LeavingOnSignal> leaving_;  // after the session: its end comes first
  std::unique_ptr<ProcessMetrics> process_metrics_;
  std::unique_ptr<ShardMetrics> metrics_;
  std::unique_ptr<ShardCheckpointer> checkpointer_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_PROCESS_H_
