#ifndef COHORT_TOOLS_LAUNCH_LAUNCH_CONFIG_H_
#define COHORT_TOOLS_LAUNCH_LAUNCH_CONFIG_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/launch/launch_options.h"
#include "tools/launch/restart_policy.h"

namespace cohort::launch {

// From the launcher's command line to the job it starts. Errors: InvalidArgument is a mistake
// on the command line (launch_main.cc points to --help and exits 2); anything else exits 1.

// The launcher's flags as launch_main.cc read them; its --help says what each means.
struct LaunchFlags {
  int num_workers = 0;
  std::optional<int> num_shards;
  std::string launcher;
  std::string hosts;
  std::string scheduler_host;
  std::vector<std::string> shard_hosts;
  int ssh_port = 0;
  std::string ssh_identity;
  std::string ssh_options;
  std::string sync_dst_dir;
  std::vector<std::string> env;
  bool tls = false;
  bool insecure = false;
  std::string tls_dir;
  std::string token_file;
  // The scheduler's flags the launcher takes too (COHORT_DEFINE_JOB_FLAGS): mode, job_id,
  // linger, baseline_images_per_second, on_worker_failure, min_workers, max_workers.
  SchedulerOptions job;
  // The shards' (COHORT_DEFINE_CHECKPOINT_FLAGS).
  CheckpointOptions checkpoints;
  bool restart_failed_shards = false;
  int max_shard_restarts = kMaxShardRestarts;
  bool restart_failed_workers = false;
  bool restart_scheduler = false;
  std::string scheduler_binary;
  std::string shard_binary;
  std::string worker_binary;
  std::string metrics_targets;
  std::string make_job_certs;
  int start_timeout = static_cast<int>(absl::ToInt64Seconds(LaunchOptions().start_timeout));
};

// What of the launcher's own process a job depends on.
struct LauncherProcess {
  std::vector<std::string> environment;  // the launcher's, "NAME=value"
  std::string current_dir;
  // Where the role binaries may be: the runfiles the launcher was started with (RUNFILES_DIR,
  // e.g. inside a test), then the ones beside its own binary (`bazel run`, or from bazel-bin).
  std::vector<std::string> runfiles_dirs;
  std::vector<int> cpus;  // the CPUs this process may run on
};

// The launcher as it runs now, from its environment (environ).
LauncherProcess ThisLauncher(const char* const* environ);

// The value of NAME in "NAME=value" entries; empty when unset.
std::string EnvValue(const std::vector<std::string>& environment, absl::string_view name);

// The directory the user ran the command in: BUILD_WORKING_DIRECTORY under `bazel run` (which
// runs the launcher in its runfiles), else the launcher's own.
std::string UserDir(const LauncherProcess& launcher);

// The job the flags and the words after `--` (worker_words) describe, checked, with the
// programs found and every path resolved: relative paths are the user's (UserDir); the children
// run in BUILD_WORKING_DIRECTORY, or over ssh in the launcher's directory. Reads the hosts
// file and checks that the TLS files exist.
absl::StatusOr<LaunchOptions> OptionsFromFlags(const LaunchFlags& flags,
                                               const std::vector<std::string>& worker_words,
                                               const LauncherProcess& launcher);

// The workers' flags, and on this machine their data, checked once by the worker binary
// (--validate_only, --validate_data=W) before anything starts, so that a mistake is said once
// rather than by every worker after the scheduler and the shards came up. Returns the worker's complaint (its output) when they are wrong, nullopt
// when they are fine.
absl::StatusOr<std::optional<std::string>> CheckWorkerFlags(const LaunchOptions& options);

// --sync_dst_dir: copies the working directory and the programs to every host of the job
// (saying so on `out`), and points `options` at the copies there. dst_dir must be absolute.
absl::Status SyncJobToHosts(LaunchOptions& options, const std::string& dst_dir,
                            const std::vector<std::string>& worker_words, std::ostream& out);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_LAUNCH_CONFIG_H_
