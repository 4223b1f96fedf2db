// launch: starts a whole Cohort job on this machine or on hosts over ssh (one scheduler, S
// parameter shards, W workers), like MXNet's launch.py. `bazel run //tools:launch -- --help`
// lists the flags.

#include <signal.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "trainer/base/crash_report.h"
#include "tools/launch/command_line.h"
#include "tools/launch/launch_config.h"
#include "tools/launch/launcher.h"
#include "tools/launch/programs.h"
#include "tools/launch/status_table.h"
#include "trainer/cli/args.h"

extern char** environ;

namespace {
const cohort::launch::LaunchFlags kDefaults;
}  // namespace

ABSL_FLAG(int, num_workers, 0, "workers to start, at least 1 (-n)");
ABSL_FLAG(std::optional<int>, num_shards, std::nullopt,
          "parameter shards to start (-s); default: as many as workers");
ABSL_FLAG(std::string, launcher, "",
          "where the processes run: local (this machine) or ssh (the hosts of -H, each reached "
          "with ssh; default when -H is given)");
ABSL_FLAG(std::string, hosts, "",
          "(-H) the job's hosts: a hosts file (lines 'host', 'host slots=N' or 'host:N'; # "
          "comments) or a list host1,host2:2 (one host: host:1). Hosts are DNS names, IPv4 or "
          "[IPv6] addresses, optionally after user@. The scheduler goes on the first host, "
          "shards one per host in turn, workers spread over the hosts in turn within their "
          "slots");
ABSL_FLAG(std::string, scheduler_host, "",
          "with -H: the host the scheduler runs on, as the hosts list names it (default: the "
          "first)");
ABSL_FLAG(std::vector<std::string>, shard_hosts, {},
          "with -H: the hosts the shards go on in turn, as the hosts list names them (default: "
          "every host)");
ABSL_FLAG(int, ssh_port, 0, "port of the hosts' ssh servers (default: ssh's own)");
ABSL_FLAG(std::string, ssh_identity, "", "ssh's private key file (-i; default: ssh's own)");
ABSL_FLAG(std::string, ssh_options, "",
          "more ssh arguments, split at spaces, e.g. \"-o StrictHostKeyChecking=accept-new\"");
ABSL_FLAG(std::string, sync_dst_dir, "",
          "first copy, with rsync, the working directory's contents (without .git and bazel-* "
          "links) to this folder on every host, and the role binaries (or your program, when it "
          "lies outside the working directory) into its .cohort-bin; processes then run there. "
          "Without it every host must have the working directory and the programs at the same "
          "paths as here (a shared file system)");
ABSL_FLAG(std::vector<std::string>, env, {},
          "NAME or NAME=VALUE, comma-separated: more environment variables for the processes on "
          "other hosts (they get COHORT_* and OMP_* anyway); NAME=VALUE also sets it here");
ABSL_FLAG(bool, tls, false,
          "mutual TLS and a job token between every pair of processes; the default over ssh");
ABSL_FLAG(bool, insecure, false,
          "plaintext with no token even over ssh (only on a network you trust entirely)");
ABSL_FLAG(std::string, tls_dir, "",
          "the job's TLS files (ca.pem and scheduler/shard/worker .pem and .key, as "
          "tools/make_job_certs.sh makes them); default: new ones made for the job and deleted "
          "after it (with --status: the folder with the job's ca.pem, for its HTTPS)");
ABSL_FLAG(std::string, token_file, "",
          "file with the job's token; default: a new random one, deleted after the job (with "
          "--status: the token of the job asked about)");
COHORT_DEFINE_JOB_FLAGS();
COHORT_DEFINE_CHECKPOINT_FLAGS();
ABSL_FLAG(bool, restart_failed_shards, false,
          "restart a shard that dies from the newest complete checkpoint (needs "
          "--checkpoint_dir and --checkpoint_every); the workers roll back to it and go on. With "
          "--shard_replicas=2 the restarted shard backs up the shares left without a backup, "
          "copied from their leaders (no checkpoint, no roll back)");
ABSL_FLAG(int, max_shard_restarts, cohort::launch::kMaxShardRestarts,
          "--restart_failed_shards: how often a shard rank is restarted at most");
ABSL_FLAG(bool, restart_failed_workers, false,
          "elastic: start a new worker in place of one that dies; it joins the running job");
ABSL_FLAG(bool, restart_scheduler, false,
          "restart the scheduler at its address if it dies while the job runs; the shards and "
          "workers register with it again within --scheduler_grace and the job goes on");
ABSL_FLAG(std::string, scheduler_binary, "",
          "scheduler program; default: //services:scheduler from the launcher's runfiles");
ABSL_FLAG(std::string, shard_binary, "",
          "shard program; default: //services:shard from the launcher's runfiles");
ABSL_FLAG(std::string, worker_binary, "",
          "worker program run with the flags after --; default: //services:worker from the "
          "launcher's runfiles, //services:worker_gpu when the flags name GPUs (--devices=gpu:0)");
ABSL_FLAG(std::string, metrics_targets, "",
          "write the job's /metrics endpoints here as a Prometheus file_sd list (labels job, "
          "role, rank), e.g. deploy/prometheus/targets/job.json; removed when the job is over");
ABSL_FLAG(std::string, status, "",
          "print the status of the job whose scheduler serves /status at HOST:PORT (its log "
          "line says where) as a table, and exit");
ABSL_FLAG(std::string, make_job_certs, "",
          "the program that makes a job's TLS files; default: tools/make_job_certs.sh from the "
          "launcher's runfiles");
ABSL_FLAG(int, start_timeout, kDefaults.start_timeout,
          "seconds to wait for the scheduler to listen (write its port file)");

namespace {

constexpr char kUsage[] =
    "Starts a Cohort job: one scheduler, S parameter shards, W workers.\n"
    "  bazel run //tools:launch -- -n 2 -s 2 -- --model lenet --dataset fashion-mnist\n"
    "      on this machine; workers run //services:worker with the flags after --\n"
    "  bazel run //tools:launch -- -n 4 -s 2 -H hosts --sync_dst_dir /tmp/job -- --model lenet\n"
    "      on the hosts in the file 'hosts', over ssh, with mutual TLS\n"
    "  bazel run //tools:launch -- -n 2 -s 2 -- ./my_trainer --epochs 3\n"
    "      workers run your own program; it learns the job from COHORT_* environment variables\n"
    "Every line the processes print is shown prefixed with [scheduler], [shard i], [worker r]\n"
    "(and the host, over ssh).\n"
    "Ctrl-C stops the whole job.\n"
    "  bazel run //tools:launch -- --status 127.0.0.1:PORT [--tls_dir DIR --token_file F]\n"
    "      prints a running job's state and per-worker speed (PORT: from the scheduler's\n"
    "      'job page on http(s)://...' line, an address to open in a browser too; a TLS job's\n"
    "      needs its ca.pem and token)";

// A usage error (InvalidArgument) points to --help and exits 2; anything else exits 1.
int Fail(const absl::Status& status) {
  const bool usage = absl::IsInvalidArgument(status);
  std::cerr << "launch: error: " << status.message() << (usage ? " (see --help)" : "") << "\n";
  return usage ? 2 : 1;
}

cohort::launch::LaunchFlags ReadFlags() {
  cohort::launch::LaunchFlags f;
  f.num_workers = absl::GetFlag(FLAGS_num_workers);
  f.num_shards = absl::GetFlag(FLAGS_num_shards);
  f.launcher = absl::GetFlag(FLAGS_launcher);
  f.hosts = absl::GetFlag(FLAGS_hosts);
  f.scheduler_host = absl::GetFlag(FLAGS_scheduler_host);
  f.shard_hosts = absl::GetFlag(FLAGS_shard_hosts);
  f.ssh_port = absl::GetFlag(FLAGS_ssh_port);
  f.ssh_identity = absl::GetFlag(FLAGS_ssh_identity);
  f.ssh_options = absl::GetFlag(FLAGS_ssh_options);
  f.sync_dst_dir = absl::GetFlag(FLAGS_sync_dst_dir);
  f.env = absl::GetFlag(FLAGS_env);
  f.tls = absl::GetFlag(FLAGS_tls);
  f.insecure = absl::GetFlag(FLAGS_insecure);
  f.tls_dir = absl::GetFlag(FLAGS_tls_dir);
  f.token_file = absl::GetFlag(FLAGS_token_file);
  cohort::JobFlagsInto(&f.job);
  f.checkpoints = cohort::CheckpointOptionsFromFlags();
  f.restart_failed_shards = absl::GetFlag(FLAGS_restart_failed_shards);
  f.max_shard_restarts = absl::GetFlag(FLAGS_max_shard_restarts);
  f.restart_failed_workers = absl::GetFlag(FLAGS_restart_failed_workers);
  f.restart_scheduler = absl::GetFlag(FLAGS_restart_scheduler);
  f.scheduler_binary = absl::GetFlag(FLAGS_scheduler_binary);
  f.shard_binary = absl::GetFlag(FLAGS_shard_binary);
  f.worker_binary = absl::GetFlag(FLAGS_worker_binary);
  f.metrics_targets = absl::GetFlag(FLAGS_metrics_targets);
  f.make_job_certs = absl::GetFlag(FLAGS_make_job_certs);
  f.start_timeout = absl::GetFlag(FLAGS_start_timeout);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::ReportCrashes(argv[0]);
  absl::SetProgramUsageMessage(kUsage);
  absl::StatusOr<cohort::launch::LauncherArgs> args = cohort::launch::SplitLauncherArgs(argc, argv);
  if (!args.ok()) return Fail(absl::InvalidArgumentError(args.status().message()));
  std::vector<char*> flag_args;
  for (std::string& a : args->flags) flag_args.push_back(a.data());
  const std::vector<char*> positional =
      cohort::ParseCommandLine(static_cast<int>(flag_args.size()), flag_args.data());
  if (positional.size() > 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument '", positional[1], "' (put the workers' flags or command after --)")));
  }
  const cohort::launch::LauncherProcess launcher = cohort::launch::ThisLauncher(environ);
  const cohort::launch::LaunchFlags flags = ReadFlags();
  if (!absl::GetFlag(FLAGS_status).empty()) {
    absl::StatusOr<std::string> table = cohort::launch::FetchStatusTable(
        absl::GetFlag(FLAGS_status),
        cohort::ResolveUserPath(flags.token_file, cohort::launch::UserDir(launcher)),
        cohort::ResolveUserPath(flags.tls_dir, cohort::launch::UserDir(launcher)));
    if (!table.ok()) return Fail(table.status());
    std::cout << *table;
    return 0;
  }

  absl::StatusOr<cohort::launch::LaunchOptions> options =
      cohort::launch::OptionsFromFlags(flags, args->worker_words, launcher);
  if (!options.ok()) return Fail(options.status());
  if (!cohort::launch::IsUserProgram(args->worker_words)) {
    absl::StatusOr<std::optional<std::string>> complaint =
        cohort::launch::CheckWorkerFlags(*options);
    if (!complaint.ok()) return Fail(complaint.status());
    if (complaint->has_value()) {
      std::cerr << **complaint
                << "launch: error: the workers' flags are wrong (above); nothing was started\n";
      return 2;
    }
  }
  if (!options->hosts.empty() && !flags.sync_dst_dir.empty()) {
    if (absl::Status s = cohort::launch::SyncJobToHosts(*options, flags.sync_dst_dir,
                                                        args->worker_words, std::cout);
        !s.ok()) {
      return Fail(s);
    }
  }
  // A closed stdout must not kill the launcher before it has stopped its children.
  signal(SIGPIPE, SIG_IGN);
  return cohort::launch::RunJob(*options);
}
