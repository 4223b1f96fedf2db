#ifndef COHORT_TOOLS_LAUNCH_LAUNCH_OPTIONS_H_
#define COHORT_TOOLS_LAUNCH_LAUNCH_OPTIONS_H_

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/checkpoint/checkpoint_options.h"
#include "services/scheduler/scheduler_options.h"
#include "tools/launch/hosts.h"
#include "tools/launch/remote.h"

namespace cohort::launch {

// One job, as `launch -n W -s S` starts it, on this machine or on hosts over ssh. Every path is
// resolved already (programs.h); launch_config.h makes it from the flags.
struct LaunchOptions {
  // The job as its scheduler runs it: W workers, S shards, the mode, the job's id (never
  // empty here), how long the scheduler lingers, the elastic settings (--min_workers,
  // --max_workers: 0 for num_workers) and the shards' restart grace. Checked (ToJobSpec).
  SchedulerOptions scheduler;
  // Where to write the job's Prometheus file_sd target list (empty: don't).
  std::string metrics_targets;

  // Where the processes run. No hosts: on this machine, each a child of the launcher. Otherwise
  // each on its host of `placement`, through ssh and the wrapper of remote.h; the programs'
  // paths and working_dir are then as the hosts see them.
  std::vector<Host> hosts;
  Placement placement;
  SshOptions ssh;
  // Remote processes get the job's COHORT_* and OMP_* variables and these of `environment`
  // (--env); local ones get all of it.
  std::vector<std::string> forwarded_env;

  // Mutual TLS and a job token between every pair of processes (off: plaintext, every
  // process told --insecure). The files are tls_dir's (ca.pem, scheduler/shard/worker .pem and
  // .key) and token_file, or, where those are empty, new ones made for this job in its scratch
  // folder with the make_job_certs script (tools/make_job_certs.sh) and removed with it.
  bool tls = false;
  std::string tls_dir;
  std::string token_file;
  std::string make_job_certs;

  std::string scheduler_binary;
  std::string shard_binary;
  // Every shard's checkpoints, paths resolved. A shard that dies is started again from
  // checkpoints.folder() (CheckpointOptions::ToArgsForRestart; up to
  // scheduler.max_shard_restarts times per rank) and the scheduler waits for it
  // (--shard_restart_grace); with replicas it backs up the shares left without a backup.
  CheckpointOptions checkpoints;
  bool restart_failed_shards = false;
  // A scheduler that dies while the job runs is started again at its address (up to
  // kMaxSchedulerRestarts times); the members register with it again within their
  // --scheduler_grace and the job goes on.
  bool restart_scheduler = false;
  // scheduler.elastic(): a worker that dies does not end the job while min_workers remain;
  // with restart_failed_workers a new worker takes its place (it joins the running job), up to
  // kMaxWorkerRestarts times in all.
  bool restart_failed_workers = false;
  // What every worker runs: the worker binary with the user's flags, or the user's own program.
  std::string worker_program;
  std::vector<std::string> worker_argv;  // argv[0] first

  std::string working_dir;               // the children's; empty: the launcher's (local only)
  std::vector<std::string> environment;  // the launcher's, "NAME=value"; children inherit it
  std::vector<int> cpus;  // the CPUs to share among the local children (OpenMP threads)
  std::string temp_root = "/tmp";        // where the job's scratch folder goes
  absl::Duration start_timeout = absl::Seconds(30);  // for the scheduler's port file
  int output_fd = STDOUT_FILENO;  // children's prefixed lines and the launcher's own messages
};

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_LAUNCH_OPTIONS_H_
