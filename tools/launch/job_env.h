#ifndef COHORT_TOOLS_LAUNCH_JOB_ENV_H_
#define COHORT_TOOLS_LAUNCH_JOB_ENV_H_

#include <string>
#include <vector>

#include "services/common/count_text.h"

namespace cohort::launch {

enum class Role { kScheduler, kShard, kWorker };

// "scheduler", "shard", "worker": COHORT_ROLE's values.
const char* RoleName(Role role);

// What one process of a job learns from its environment.
struct JobEnvSpec {
  std::string job_id;
  Role role = Role::kWorker;
  int rank = 0;  // shards and workers
  int num_workers = 1;
  int num_shards = 1;
  std::string mode;
  std::string scheduler_address;  // host:port; shards and workers (empty: not set)
  // The CPUs the launcher may use (sched_getaffinity), ascending; empty: the host decides
  // (remote).
  std::vector<int> cpus;
  // Where the process serves its /metrics and writes the port it got (empty: not set).
  std::string metrics_bind;
  std::string metrics_port_file;
  // The job's TLS folder and token file (empty: plaintext).
  std::string tls_dir;
  std::string token_file;
};

// The environment of one child: the launcher's own (`base`, "NAME=value" entries) with the job's
// COHORT_* variables set (replacing any inherited ones), which is how workers and the user's own
// training program learn the job:
//   COHORT_JOB_ID, COHORT_ROLE, COHORT_RANK (shards, workers), COHORT_NUM_WORKERS,
//   COHORT_NUM_SHARDS, COHORT_SCHEDULER (shards, workers), COHORT_MODE, COHORT_TLS_DIR and
//   COHORT_TOKEN_FILE (or COHORT_INSECURE=1 without TLS), and, when set, COHORT_METRICS_BIND and
//   COHORT_METRICS_PORT_FILE (the worker binary reads them).
// COHORT_JOB_ID is also the marker by which tests find a job's processes in /proc.
// Processes on one machine must not each start a thread per core: unless `base` sets it,
// OMP_NUM_THREADS = max(1, cores / num_workers) for workers (none when the cpus are unknown:
// the remote host divides its own) and 1 for the scheduler and shards (they do little
// compute). Where every worker gets whole cores, each also gets COHORT_CPUS, the slice of the
// cpus of its rank (modulo num_workers), which the worker confines itself to. Workers whose
// OMP_NUM_THREADS (the user's) oversubscribe the cores, or cores unknown, also get
// OMP_WAIT_POLICY=passive unless `base` sets it; threads that fit keep OpenMP's default.
std::vector<std::string> JobEnvironment(const std::vector<std::string>& base,
                                        const JobEnvSpec& spec);

// What of a job environment travels to another host: COHORT_*, OMP_* and the `forwarded` names.
std::vector<std::string> RemoteEnvironment(const std::vector<std::string>& env,
                                           const std::vector<std::string>& forwarded);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_JOB_ENV_H_
