// launch: starts a whole Cohort job on this machine (one scheduler, S parameter shards, W
// workers), like MXNet's launch.py --launcher local. `bazel run //tools:launch -- --help` lists
// the flags.

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "services/common/http_server.h"
#include "tools/launch/child_process.h"
#include "tools/launch/command_line.h"
#include "tools/launch/launcher.h"
#include "tools/launch/programs.h"
#include "tools/launch/status_table.h"
#include "trainer/cli/args.h"
#include "trainer/kvstore/kvstore_mode.h"

extern char** environ;

namespace {
const cohort::launch::LaunchOptions kDefaults;
}  // namespace

ABSL_FLAG(int, num_workers, 0, "workers to start, at least 1 (-n)");
ABSL_FLAG(std::optional<int>, num_shards, std::nullopt,
          "parameter shards to start (-s); default: as many as workers");
ABSL_FLAG(std::string, launcher, "local",
          "where the processes run: local (this machine; ssh is not supported yet)");
ABSL_FLAG(std::string, mode, kDefaults.mode, "kvstore mode: dist_sync or dist_async");
ABSL_FLAG(int, linger, kDefaults.linger_s,
          "seconds the scheduler keeps serving its status and metrics after the job ends; the "
          "launcher waits for it");
ABSL_FLAG(std::string, job_id, "",
          "the job's id (letters, digits, '.', '_', '-'); default: a new unique one. Every "
          "process gets it as COHORT_JOB_ID");
ABSL_FLAG(std::string, scheduler_binary, "",
          "scheduler program; default: //services:scheduler from the launcher's runfiles");
ABSL_FLAG(std::string, shard_binary, "",
          "shard program; default: //services:shard from the launcher's runfiles");
ABSL_FLAG(std::string, worker_binary, "",
          "worker program run with the flags after --; default: //services:worker from the "
          "launcher's runfiles");
ABSL_FLAG(std::string, metrics_targets, "",
          "write the job's /metrics endpoints here as a Prometheus file_sd list (labels job, "
          "role, rank), e.g. deploy/prometheus/targets/job.json; removed when the job is over");
ABSL_FLAG(double, baseline_images_per_second, 0,
          "images/sec of one worker training alone, for the scaling-efficiency metric");
ABSL_FLAG(std::string, status, "",
          "print the status of the job whose scheduler serves /status at HOST:PORT (its log "
          "line says where) as a table, and exit");
ABSL_FLAG(int, start_timeout, static_cast<int>(absl::ToInt64Seconds(kDefaults.start_timeout)),
          "seconds to wait for the scheduler to listen (write its port file)");

namespace {

constexpr char kUsage[] =
    "Starts a Cohort job on this machine: one scheduler, S parameter shards, W workers.\n"
    "  bazel run //tools:launch -- -n 2 -s 2 -- --model lenet --dataset fashion-mnist\n"
    "      workers run //services:worker with the flags after --\n"
    "  bazel run //tools:launch -- -n 2 -s 2 -- ./my_trainer --epochs 3\n"
    "      workers run your own program; it learns the job from COHORT_* environment variables\n"
    "Every line the processes print is shown prefixed with [scheduler], [shard i], [worker r].\n"
    "Ctrl-C stops the whole job.\n"
    "  bazel run //tools:launch -- --status 127.0.0.1:PORT\n"
    "      prints a running job's state and per-worker speed (PORT: from the scheduler's\n"
    "      'status on http://...' line)";

int UsageError(absl::string_view message) {
  std::cerr << "launch: error: " << message << " (see --help)\n";
  return 2;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool IsValidJobId(absl::string_view id) {
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return !id.empty();
}

// Where the role binaries may be: the runfiles the launcher was started with (RUNFILES_DIR,
// e.g. inside a test), then the ones beside its own binary (`bazel run`, or run from bazel-bin).
std::vector<std::string> RunfilesDirs() {
  std::vector<std::string> dirs = {Env("RUNFILES_DIR")};
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0)
    dirs.push_back(absl::StrCat(absl::string_view(exe, static_cast<size_t>(n)), ".runfiles"));
  return dirs;
}

// `launch --status HOST:PORT`: the scheduler's /status page as a table.
int PrintStatus(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return UsageError(absl::StrCat("--status '", address, "': expected HOST:PORT"));
  }
  absl::StatusOr<cohort::HttpResponse> page =
      cohort::HttpGet(address.substr(0, colon), port, "/status");
  if (!page.ok()) {
    std::cerr << "launch: error: " << page.status().message()
              << " (is the scheduler running, or lingering with --linger?)\n";
    return 1;
  }
  if (page->status != 200) {
    std::cerr << "launch: error: " << address << "/status answered " << page->status
              << "; is that a Cohort scheduler's metrics port?\n";
    return 1;
  }
  absl::StatusOr<std::string> table = cohort::launch::StatusTable(page->body);
  if (!table.ok()) {
    std::cerr << "launch: error: " << address << ": " << table.status().message() << "\n";
    return 1;
  }
  std::cout << *table;
  return 0;
}

}  // namespace

// The workers' flags, checked once by the worker binary before anything starts: a mistake is
// said once, instead of by every worker after the scheduler and the shards came up.
int CheckWorkerFlags(const cohort::launch::LaunchOptions& o) {
  cohort::launch::SpawnOptions check;
  check.path = o.worker_program;
  check.argv = o.worker_argv;
  check.argv.insert(check.argv.begin() + 1, "--validate_only");
  check.env = o.environment;
  check.working_dir = o.working_dir;
  absl::StatusOr<cohort::launch::CompletedProcess> done =
      cohort::launch::RunToCompletion(check, absl::Seconds(60));
  if (!done.ok()) {
    std::cerr << "launch: error: checking the workers' flags: " << done.status().message() << "\n";
    return 1;
  }
  if (cohort::launch::ExitCodeOf(done->wait_status) == 0) return 0;
  std::cerr << done->output << "launch: error: the workers' flags are wrong (above); nothing "
            << "was started\n";
  return 2;
}

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  absl::StatusOr<cohort::launch::LauncherArgs> args = cohort::launch::SplitLauncherArgs(argc, argv);
  if (!args.ok()) return UsageError(args.status().message());
  std::vector<char*> flags;
  for (std::string& a : args->flags) flags.push_back(a.data());
  const std::vector<char*> positional =
      cohort::ParseCommandLine(static_cast<int>(flags.size()), flags.data());
  if (positional.size() > 1) {
    return UsageError(absl::StrCat("unexpected argument '", positional[1],
                                   "' (put the workers' flags or command after --)"));
  }
  if (const std::string status = absl::GetFlag(FLAGS_status); !status.empty()) {
    return PrintStatus(status);
  }

  const std::string launcher = absl::GetFlag(FLAGS_launcher);
  if (launcher == "ssh") {
    return UsageError("--launcher ssh is not supported yet; use --launcher local");
  }
  if (launcher != "local") {
    return UsageError(absl::StrCat("unknown --launcher '", launcher, "'; use local"));
  }
  cohort::launch::LaunchOptions o;
  o.num_workers = absl::GetFlag(FLAGS_num_workers);
  if (o.num_workers < 1) return UsageError("give the number of workers with -n N (at least 1)");
  o.num_shards = absl::GetFlag(FLAGS_num_shards).value_or(o.num_workers);
  if (o.num_shards < 1) return UsageError("the number of shards, -s N, must be at least 1");
  o.mode = absl::GetFlag(FLAGS_mode);
  if (const auto mode = cohort::ParseKVStoreMode(o.mode);
      !mode.ok() || *mode == cohort::KVStoreMode::kLocal) {
    return UsageError(absl::StrCat("unknown --mode '", o.mode, "'; use dist_sync or dist_async"));
  }
  o.metrics_targets = absl::GetFlag(FLAGS_metrics_targets);
  if (!o.metrics_targets.empty() && o.metrics_targets[0] != '/' &&
      !Env("BUILD_WORKING_DIRECTORY").empty()) {
    o.metrics_targets = absl::StrCat(Env("BUILD_WORKING_DIRECTORY"), "/", o.metrics_targets);
  }
  o.baseline_images_per_second = absl::GetFlag(FLAGS_baseline_images_per_second);
  o.linger_s = absl::GetFlag(FLAGS_linger);
  if (o.linger_s < 0) return UsageError("--linger must be 0 or more seconds");
  const int start_timeout = absl::GetFlag(FLAGS_start_timeout);
  if (start_timeout < 1) return UsageError("--start_timeout must be at least 1 second");
  o.start_timeout = absl::Seconds(start_timeout);
  o.job_id = absl::GetFlag(FLAGS_job_id);
  if (o.job_id.empty()) o.job_id = cohort::launch::NewJobId();
  if (!IsValidJobId(o.job_id)) {
    return UsageError(
        absl::StrCat("--job_id '", o.job_id, "' may hold only letters, digits, '.', '_' and '-'"));
  }

  // Relative paths are relative to where the user ran the command, even under `bazel run`; the
  // children run there too.
  o.working_dir = Env("BUILD_WORKING_DIRECTORY");
  const std::vector<std::string> runfiles = RunfilesDirs();
  auto fail = [](const absl::Status& status) {
    std::cerr << "launch: error: " << status.message() << "\n";
    return 1;
  };
  absl::StatusOr<std::string> scheduler = cohort::launch::FindRoleBinary(
      cohort::launch::Role::kScheduler, absl::GetFlag(FLAGS_scheduler_binary), runfiles,
      o.working_dir);
  if (!scheduler.ok()) return fail(scheduler.status());
  o.scheduler_binary = *scheduler;
  absl::StatusOr<std::string> shard = cohort::launch::FindRoleBinary(
      cohort::launch::Role::kShard, absl::GetFlag(FLAGS_shard_binary), runfiles, o.working_dir);
  if (!shard.ok()) return fail(shard.status());
  o.shard_binary = *shard;
  if (cohort::launch::IsUserProgram(args->worker_words)) {
    if (!absl::GetFlag(FLAGS_worker_binary).empty()) {
      return UsageError(absl::StrCat(
          "--worker_binary runs with the flags after --, but '", args->worker_words[0],
          "' is a program; pass either --worker_binary and flags, or your own command"));
    }
    absl::StatusOr<std::string> program =
        cohort::launch::FindProgram(args->worker_words[0], Env("PATH"), o.working_dir);
    if (!program.ok()) return fail(program.status());
    o.worker_program = *program;
    o.worker_argv = args->worker_words;
  } else {
    absl::StatusOr<std::string> worker = cohort::launch::FindRoleBinary(
        cohort::launch::Role::kWorker, absl::GetFlag(FLAGS_worker_binary), runfiles, o.working_dir);
    if (!worker.ok()) return fail(worker.status());
    o.worker_program = *worker;
    o.worker_argv = {*worker};
    o.worker_argv.insert(o.worker_argv.end(), args->worker_words.begin(), args->worker_words.end());
  }

  for (char** e = environ; *e != nullptr; ++e) o.environment.emplace_back(*e);
  if (!cohort::launch::IsUserProgram(args->worker_words)) {
    if (const int rc = CheckWorkerFlags(o); rc != 0) return rc;
  }
  o.cores = cohort::launch::AvailableCores();
  o.temp_root = Env("TMPDIR").empty() ? "/tmp" : Env("TMPDIR");
  // A closed stdout must not kill the launcher before it has stopped its children.
  signal(SIGPIPE, SIG_IGN);
  return cohort::launch::RunJob(o);
}
