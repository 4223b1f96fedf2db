// launch: starts a whole Cohort job on this machine (one scheduler, S parameter shards, W
// workers), like MXNet's launch.py --launcher local. `bazel run //tools:launch -- --help` lists
// the flags.

#include <signal.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "services/common/addresses.h"
#include "services/common/http_server.h"
#include "services/common/port_file.h"
#include "tools/launch/child_process.h"
#include "tools/launch/command_line.h"
#include "tools/launch/hosts.h"
#include "tools/launch/launcher.h"
#include "tools/launch/programs.h"
#include "tools/launch/remote.h"
#include "tools/launch/status_table.h"
#include "tools/launch/sync.h"
#include "trainer/cli/args.h"
#include "trainer/kvstore/kvstore_mode.h"

extern char** environ;

namespace {
const cohort::launch::LaunchOptions kDefaults;
}  // namespace

ABSL_FLAG(int, num_workers, 0, "workers to start, at least 1 (-n)");
ABSL_FLAG(std::optional<int>, num_shards, std::nullopt,
          "parameter shards to start (-s); default: as many as workers");
ABSL_FLAG(std::string, launcher, "",
          "where the processes run: local (this machine) or ssh (the hosts of -H, each reached "
          "with ssh; default when -H is given)");
ABSL_FLAG(std::string, hosts, "",
          "(-H) the job's hosts: a hosts file (lines 'host', 'host slots=N' or 'host:N'; # "
          "comments) or a list host1,host2:2. The scheduler goes on the first host, shards one "
          "per host in turn, workers spread over the hosts in turn within their slots");
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
          "after it");
ABSL_FLAG(std::string, token_file, "",
          "file with the job's token; default: a new random one, deleted after the job (with "
          "--status: the token of the job asked about)");
ABSL_FLAG(std::string, mode, kDefaults.mode, "kvstore mode: dist_sync or dist_async");
ABSL_FLAG(int, linger, kDefaults.linger_s,
          "seconds the scheduler keeps serving its status and metrics after the job ends; the "
          "launcher waits for it");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "the shards write checkpoints here, a folder per step (a folder every shard's host "
          "sees: this machine's, or a network file system)");
ABSL_FLAG(int64_t, checkpoint_every, 0, "steps between checkpoints (0: none)");
ABSL_FLAG(int, checkpoint_keep, 3, "complete checkpoints to keep");
ABSL_FLAG(std::string, resume, "",
          "restart the job from the newest complete checkpoint under this folder (the workers go "
          "on at its step); checkpoints go on there unless --checkpoint_dir says otherwise");
ABSL_FLAG(bool, restart_failed_shards, false,
          "restart a shard that dies from the newest complete checkpoint (needs "
          "--checkpoint_dir and --checkpoint_every); the workers roll back to it and go on");
ABSL_FLAG(std::string, on_worker_failure, "fail",
          "what a worker's death does: fail (the job fails) or elastic (the others go on from the "
          "shards' newest checkpoint while --min_workers remain; needs --checkpoint_dir and "
          "--checkpoint_every)");
ABSL_FLAG(int, min_workers, 1, "elastic: the fewest workers the job goes on with");
ABSL_FLAG(int, max_workers, 0, "elastic: the most workers the job takes (0: -n)");
ABSL_FLAG(bool, restart_failed_workers, false,
          "elastic: start a new worker in place of one that dies; it joins the running job");
ABSL_FLAG(bool, restart_scheduler, false,
          "restart the scheduler at its address if it dies while the job runs; the shards and "
          "workers register with it again within --scheduler_grace and the job goes on");
ABSL_FLAG(std::string, job_id, "",
          "the job's id (letters, digits, '.', '_', '-'); default: a new unique one. Every "
          "process gets it as COHORT_JOB_ID");
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
ABSL_FLAG(double, baseline_images_per_second, 0,
          "images/sec of one worker training alone, for the scaling-efficiency metric");
ABSL_FLAG(std::string, status, "",
          "print the status of the job whose scheduler serves /status at HOST:PORT (its log "
          "line says where) as a table, and exit");
ABSL_FLAG(std::string, make_job_certs, "",
          "the program that makes a job's TLS files; default: tools/make_job_certs.sh from the "
          "launcher's runfiles");
ABSL_FLAG(int, start_timeout, static_cast<int>(absl::ToInt64Seconds(kDefaults.start_timeout)),
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

// `launch --status HOST:PORT [--token_file FILE]`: the scheduler's /status page as a table.
int PrintStatus(const std::string& address, const std::string& token_file) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return UsageError(absl::StrCat("--status '", address, "': expected HOST:PORT"));
  }
  std::string authorization;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = cohort::ReadWholeFile(token_file);
    if (!token.ok()) return UsageError(absl::StrCat("--token_file: ", token.status().message()));
    authorization = absl::StrCat("Bearer ", absl::StripAsciiWhitespace(*token));
  }
  absl::StatusOr<cohort::HttpResponse> page =
      cohort::HttpGet(address.substr(0, colon), port, "/status", authorization);
  if (!page.ok()) {
    std::cerr << "launch: error: " << page.status().message()
              << " (is the scheduler running, or lingering with --linger?)\n";
    return 1;
  }
  if (page->status == 401) {
    std::cerr << "launch: error: " << address << "/status needs the job's token: give "
              << (token_file.empty() ? "--token_file FILE" : "the right --token_file") << "\n";
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

std::string CurrentDir() {
  char dir[4096];
  return getcwd(dir, sizeof(dir)) != nullptr ? dir : "";
}

// A path the user typed, relative to the directory they ran the command in.
std::string UserPath(const std::string& path, const std::string& user_dir) {
  if (path.empty() || path[0] == '/' || user_dir.empty()) return path;
  return absl::StrCat(user_dir, "/", path);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// --env: NAME forwards the launcher's value to other hosts; NAME=VALUE sets it too.
int ConfigureEnvironment(cohort::launch::LaunchOptions& o) {
  for (const std::string& entry : absl::GetFlag(FLAGS_env)) {
    const size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (name.empty()) return UsageError(absl::StrCat("--env '", entry, "': expected NAME or NAME=VALUE"));
    if (eq != std::string::npos) {
      o.environment.erase(std::remove_if(o.environment.begin(), o.environment.end(),
                                         [&](const std::string& e) {
                                           return absl::StartsWith(e, name + "=");
                                         }),
                          o.environment.end());
      o.environment.push_back(entry);
    }
    o.forwarded_env.push_back(name);
  }
  return 0;
}

// Mutual TLS and a token by default over ssh; plaintext by default on this machine's loopback.
int ConfigureSecurity(cohort::launch::LaunchOptions& o, bool ssh,
                      const std::vector<std::string>& runfiles) {
  const bool insecure = absl::GetFlag(FLAGS_insecure);
  o.tls_dir = UserPath(absl::GetFlag(FLAGS_tls_dir), o.working_dir);
  o.token_file = UserPath(absl::GetFlag(FLAGS_token_file), o.working_dir);
  const bool asked_for_tls = absl::GetFlag(FLAGS_tls) || !o.tls_dir.empty() || !o.token_file.empty();
  if (insecure && asked_for_tls) {
    return UsageError("--insecure and --tls (or --tls_dir, --token_file) contradict each other");
  }
  o.tls = asked_for_tls || (ssh && !insecure);
  if (!o.tls) return 0;
  if (!o.tls_dir.empty() && !IsFile(absl::StrCat(o.tls_dir, "/ca.pem"))) {
    return UsageError(absl::StrCat("--tls_dir ", o.tls_dir,
                                   " has no ca.pem; make the files with tools/make_job_certs.sh "
                                   "DIR scheduler shard worker"));
  }
  if (!o.token_file.empty() && !IsFile(o.token_file)) {
    return UsageError(absl::StrCat("--token_file ", o.token_file, ": no such file"));
  }
  o.make_job_certs = absl::GetFlag(FLAGS_make_job_certs);
  for (const std::string& dir : runfiles) {
    if (!o.make_job_certs.empty()) break;
    if (const std::string p = absl::StrCat(dir, "/cohort/tools/make_job_certs.sh"); IsFile(p)) {
      o.make_job_certs = p;
    }
  }
  if (o.tls_dir.empty() && o.make_job_certs.empty()) {
    std::cerr << "launch: error: cannot find tools/make_job_certs.sh in the launcher's runfiles; "
                 "pass --make_job_certs or --tls_dir\n";
    return 1;
  }
  return 0;
}

// -H: the hosts (a file, or a list), where each process goes, and how to reach them.
int ConfigureHosts(cohort::launch::LaunchOptions& o, const std::string& hosts_flag) {
  const std::string path = UserPath(hosts_flag, o.working_dir);
  absl::StatusOr<std::vector<cohort::launch::Host>> hosts;
  if (IsFile(path)) {
    absl::StatusOr<std::string> text = cohort::ReadWholeFile(path);
    if (!text.ok()) return UsageError(text.status().message());
    hosts = cohort::launch::ParseHostsFile(*text, hosts_flag);
  } else if (absl::StrContains(hosts_flag, '/')) {
    return UsageError(absl::StrCat("-H ", hosts_flag, ": no such hosts file"));
  } else {
    hosts = cohort::launch::ParseHostList(hosts_flag);
  }
  if (!hosts.ok()) return UsageError(hosts.status().message());
  absl::StatusOr<cohort::launch::Placement> placement =
      cohort::launch::PlaceJob(*hosts, o.num_workers, o.num_shards,
                               {absl::GetFlag(FLAGS_scheduler_host), absl::GetFlag(FLAGS_shard_hosts)});
  if (!placement.ok()) return UsageError(placement.status().message());
  o.hosts = *std::move(hosts);
  o.placement = *std::move(placement);
  std::set<int> used(o.placement.shards.begin(), o.placement.shards.end());
  used.insert(o.placement.workers.begin(), o.placement.workers.end());
  used.insert(o.placement.scheduler);
  const std::string scheduler_host =
      cohort::launch::AddressOfHost(o.hosts[o.placement.scheduler].name);
  if (used.size() > 1 && cohort::IsLoopbackAddress(scheduler_host)) {
    return UsageError(absl::StrCat(
        "the scheduler's host '", scheduler_host,
        "' is a loopback name, which the processes on the other hosts cannot reach; name it in "
        "the hosts list by an address or name every host can reach"));
  }
  o.ssh.port = absl::GetFlag(FLAGS_ssh_port);
  o.ssh.identity = UserPath(absl::GetFlag(FLAGS_ssh_identity), o.working_dir);
  o.ssh.extra = absl::StrSplit(absl::GetFlag(FLAGS_ssh_options), ' ', absl::SkipEmpty());
  return 0;
}

// --sync_dst_dir: copies the working directory and the programs to every host first; the job
// then runs them there.
int SyncToHosts(cohort::launch::LaunchOptions& o, const std::string& dst_dir,
                const std::vector<std::string>& worker_words) {
  if (dst_dir[0] != '/') {
    return UsageError(absl::StrCat("--sync_dst_dir ", dst_dir,
                                   ": give an absolute path (it is a folder on every host)"));
  }
  cohort::launch::SyncPlan plan;
  plan.working_dir = o.working_dir;
  plan.dst_dir = dst_dir;
  plan.programs = {o.scheduler_binary, o.shard_binary};
  // A program found on the PATH is the host's own (python3): it is not copied.
  const bool copy_worker = !cohort::launch::IsUserProgram(worker_words) ||
                           absl::StrContains(worker_words[0], '/');
  if (copy_worker) plan.programs.push_back(o.worker_program);
  std::set<std::string> hosts;
  std::vector<cohort::launch::Host> used;
  for (int h : o.placement.workers) hosts.insert(o.hosts[h].name);
  for (int h : o.placement.shards) hosts.insert(o.hosts[h].name);
  hosts.insert(o.hosts[o.placement.scheduler].name);
  for (const auto& h : o.hosts) {
    if (hosts.count(h.name) > 0) used.push_back(h);
  }
  std::cout << "launch: copying " << o.working_dir << " and " << plan.programs.size()
            << " programs to " << dst_dir << " on " << used.size() << " host(s)\n"
            << std::flush;
  if (absl::Status s = cohort::launch::SyncToHosts(plan, o.ssh, used, o.environment); !s.ok()) {
    std::cerr << "launch: error: " << s.message() << "\n";
    return 1;
  }
  const std::vector<std::string> synced = cohort::launch::SyncedPrograms(plan);
  o.scheduler_binary = synced[0];
  o.shard_binary = synced[1];
  if (copy_worker) {
    o.worker_program = synced[2];
    if (!cohort::launch::IsUserProgram(worker_words)) o.worker_argv[0] = synced[2];
  }
  o.working_dir = dst_dir;
  return 0;
}

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
    const std::string user_dir = Env("BUILD_WORKING_DIRECTORY");
    return PrintStatus(status, UserPath(absl::GetFlag(FLAGS_token_file),
                                        user_dir.empty() ? CurrentDir() : user_dir));
  }

  const std::string hosts_flag = absl::GetFlag(FLAGS_hosts);
  std::string launcher = absl::GetFlag(FLAGS_launcher);
  if (launcher.empty()) launcher = hosts_flag.empty() ? "local" : "ssh";
  if (launcher != "local" && launcher != "ssh") {
    return UsageError(absl::StrCat("unknown --launcher '", launcher, "'; use local or ssh"));
  }
  if (launcher == "local" && !hosts_flag.empty()) {
    return UsageError("-H names hosts, which only --launcher ssh uses");
  }
  if (launcher == "ssh" && hosts_flag.empty()) {
    return UsageError("--launcher ssh needs the hosts: -H FILE, or -H host1,host2:2");
  }
  if (hosts_flag.empty() &&
      (!absl::GetFlag(FLAGS_scheduler_host).empty() || !absl::GetFlag(FLAGS_shard_hosts).empty())) {
    return UsageError("--scheduler_host and --shard_hosts place processes on the hosts of -H");
  }
  const bool ssh = launcher == "ssh";
  cohort::launch::LaunchOptions o;
  if (absl::GetFlag(FLAGS_checkpoint_every) < 0 || absl::GetFlag(FLAGS_checkpoint_keep) < 1) {
    return UsageError("--checkpoint_every must be >= 0 steps and --checkpoint_keep >= 1");
  }
  if (absl::GetFlag(FLAGS_checkpoint_every) > 0 && absl::GetFlag(FLAGS_checkpoint_dir).empty() &&
      absl::GetFlag(FLAGS_resume).empty()) {
    return UsageError("--checkpoint_every needs the folder: --checkpoint_dir DIR (or --resume DIR)");
  }
  o.restart_failed_shards = absl::GetFlag(FLAGS_restart_failed_shards);
  o.restart_scheduler = absl::GetFlag(FLAGS_restart_scheduler);
  if (o.restart_failed_shards && (absl::GetFlag(FLAGS_checkpoint_every) == 0 ||
                                  (absl::GetFlag(FLAGS_checkpoint_dir).empty() &&
                                   absl::GetFlag(FLAGS_resume).empty()))) {
    return UsageError("--restart_failed_shards restarts a shard from its checkpoint: give "
                      "--checkpoint_dir DIR and --checkpoint_every N");
  }
  o.num_workers = absl::GetFlag(FLAGS_num_workers);
  if (o.num_workers < 1) return UsageError("give the number of workers with -n N (at least 1)");
  const std::string on_worker_failure = absl::GetFlag(FLAGS_on_worker_failure);
  o.elastic = on_worker_failure == "elastic";
  o.min_workers = absl::GetFlag(FLAGS_min_workers);
  o.max_workers = absl::GetFlag(FLAGS_max_workers);
  o.restart_failed_workers = absl::GetFlag(FLAGS_restart_failed_workers);
  if (on_worker_failure != "fail" && !o.elastic) {
    return UsageError(absl::StrCat("--on_worker_failure=", on_worker_failure,
                                   ": expected fail or elastic"));
  }
  if (o.elastic && (o.min_workers < 1 || o.min_workers > o.num_workers ||
                    (o.max_workers != 0 && o.max_workers < o.num_workers))) {
    return UsageError(absl::StrCat("--min_workers=", o.min_workers, " and --max_workers=",
                                   o.max_workers, ": need 1 <= min_workers <= -n (",
                                   o.num_workers, ") <= max_workers"));
  }
  if ((o.elastic || o.restart_failed_workers) &&
      (!o.elastic || absl::GetFlag(FLAGS_checkpoint_every) == 0 ||
       (absl::GetFlag(FLAGS_checkpoint_dir).empty() && absl::GetFlag(FLAGS_resume).empty()))) {
    return UsageError("--on_worker_failure=elastic goes back to the shards' newest checkpoint "
                      "when the workers change: give --checkpoint_dir DIR and --checkpoint_every "
                      "N (--restart_failed_workers needs it too)");
  }
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
  // children run there too (over ssh: at the same path, or in --sync_dst_dir).
  o.working_dir = Env("BUILD_WORKING_DIRECTORY");
  if (o.working_dir.empty() && ssh) o.working_dir = CurrentDir();
  if (const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir); !dir.empty()) {
    o.shard_flags.push_back(absl::StrCat("--checkpoint_dir=", UserPath(dir, o.working_dir)));
  }
  if (const std::string dir = absl::GetFlag(FLAGS_resume); !dir.empty()) {
    o.shard_flags.push_back(absl::StrCat("--resume=", UserPath(dir, o.working_dir)));
  }
  // A restarted shard resumes from where the job checkpoints.
  o.checkpoint_dir = UserPath(absl::GetFlag(FLAGS_checkpoint_dir).empty()
                                  ? absl::GetFlag(FLAGS_resume)
                                  : absl::GetFlag(FLAGS_checkpoint_dir),
                              o.working_dir);
  if (absl::GetFlag(FLAGS_checkpoint_every) > 0) {
    o.shard_flags.push_back(
        absl::StrCat("--checkpoint_every=", absl::GetFlag(FLAGS_checkpoint_every)));
    o.shard_flags.push_back(
        absl::StrCat("--checkpoint_keep=", absl::GetFlag(FLAGS_checkpoint_keep)));
  }
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
        cohort::launch::Role::kWorker, absl::GetFlag(FLAGS_worker_binary), runfiles, o.working_dir,
        cohort::launch::WorkerBinaryName(args->worker_words));
    if (!worker.ok()) return fail(worker.status());
    o.worker_program = *worker;
    o.worker_argv = {*worker};
    o.worker_argv.insert(o.worker_argv.end(), args->worker_words.begin(), args->worker_words.end());
  }

  for (char** e = environ; *e != nullptr; ++e) o.environment.emplace_back(*e);
  if (const int rc = ConfigureEnvironment(o); rc != 0) return rc;
  if (const int rc = ConfigureSecurity(o, ssh, runfiles); rc != 0) return rc;
  if (ssh) {
    if (const int rc = ConfigureHosts(o, hosts_flag); rc != 0) return rc;
  }
  if (!cohort::launch::IsUserProgram(args->worker_words)) {
    if (const int rc = CheckWorkerFlags(o); rc != 0) return rc;
  }
  if (ssh && !absl::GetFlag(FLAGS_sync_dst_dir).empty()) {
    if (const int rc = SyncToHosts(o, absl::GetFlag(FLAGS_sync_dst_dir), args->worker_words);
        rc != 0) {
      return rc;
    }
  }
  o.cores = cohort::launch::AvailableCores();
  o.temp_root = Env("TMPDIR").empty() ? "/tmp" : Env("TMPDIR");
  // A closed stdout must not kill the launcher before it has stopped its children.
  signal(SIGPIPE, SIG_IGN);
  return cohort::launch::RunJob(o);
}
