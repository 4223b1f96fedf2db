#include "tools/launch/launch_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/common/addresses.h"
#include "services/common/cpu_list.h"
#include "trainer/io/whole_file.h"
#include "tools/launch/child_process.h"
#include "tools/launch/hosts.h"
#include "tools/launch/data_sync.h"
#include "tools/launch/launcher.h"
#include "tools/launch/programs.h"
#include "tools/launch/restart_policy.h"
#include "tools/launch/sync.h"
#include "trainer/base/status_macros.h"
#include "trainer/cli/args.h"

namespace cohort::launch {
namespace {

// --restart_failed_shards: how long the scheduler waits for a restarted shard.
constexpr absl::Duration kShardRestartGrace = absl::Seconds(60);

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

// An error that is not the command line's: whatever its code, it must not read as one.
absl::Status NotUsage(const absl::Status& s) {
  return absl::IsInvalidArgument(s) ? absl::FailedPreconditionError(s.message()) : s;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// -H, --launcher and the placement flags agree; whether the job runs over ssh.
absl::StatusOr<bool> UsesSsh(const LaunchFlags& f) {
  std::string launcher = f.launcher;
  if (launcher.empty()) launcher = f.hosts.empty() ? "local" : "ssh";
  if (launcher != "local" && launcher != "ssh") {
    return Usage(absl::StrCat("unknown --launcher '", launcher, "'; use local or ssh"));
  }
  if (launcher == "local" && !f.hosts.empty()) {
    return Usage("-H names hosts, which only --launcher ssh uses");
  }
  if (launcher == "ssh" && f.hosts.empty()) {
    return Usage("--launcher ssh needs the hosts: -H FILE, or -H host1,host2:2");
  }
  if (f.hosts.empty() && (!f.scheduler_host.empty() || !f.shard_hosts.empty())) {
    return Usage("--scheduler_host and --shard_hosts place processes on the hosts of -H");
  }
  return launcher == "ssh";
}

// The job as its scheduler and shards run it, checked by their own rules (SchedulerOptions,
// CheckpointOptions); then what the launcher adds: restarts and elastic workers need
// checkpoints to go back to.
absl::Status ConfigureJob(const LaunchFlags& f, const std::string& user_dir, LaunchOptions& o) {
  if (f.num_workers < 1) return Usage("give the number of workers with -n N (at least 1)");
  RETURN_IF_ERROR(f.checkpoints.Validate());
  o.scheduler = f.job;
  o.scheduler.num_workers = f.num_workers;
  o.scheduler.num_shards = f.num_shards.value_or(f.num_workers);
  if (o.scheduler.num_shards < 1) return Usage("the number of shards, -s N, must be at least 1");
  o.restart_failed_shards = f.restart_failed_shards;
  o.restart_scheduler = f.restart_scheduler;
  o.restart_failed_workers = f.restart_failed_workers;
  if (o.restart_failed_shards) {
    o.scheduler.shard_restart_grace_s = absl::ToDoubleSeconds(kShardRestartGrace);
    if (f.max_shard_restarts < 1) {
      return Usage(absl::StrCat("--max_shard_restarts=", f.max_shard_restarts,
                                ": a shard rank is restarted at least once (1 or more)"));
    }
    o.scheduler.max_shard_restarts = f.max_shard_restarts;
  }
  ASSIGN_OR_RETURN(const JobSpec spec, o.scheduler.ToJobSpec());
  o.scheduler.job_id = spec.job_id;  // a new one when none was given
  const bool checkpoints = f.checkpoints.checkpoint_every > 0;
  // With replicas a restarted shard copies its shares from their leaders: no checkpoint needed.
  if (o.restart_failed_shards && !checkpoints && o.scheduler.shard_replicas < 2) {
    return Usage("--restart_failed_shards restarts a shard from its checkpoint: give "
                 "--checkpoint_dir DIR and --checkpoint_every N");
  }
  if ((o.scheduler.elastic() || o.restart_failed_workers) &&
      (!o.scheduler.elastic() || !checkpoints)) {
    return Usage("--on_worker_failure=elastic goes back to the shards' newest checkpoint "
                 "when the workers change: give --checkpoint_dir DIR and --checkpoint_every "
                 "N (--restart_failed_workers needs it too)");
  }
  // Only under `bazel run`: elsewhere the launcher's directory is the user's already.
  o.metrics_targets = ResolveUserPath(f.metrics_targets, user_dir);
  if (f.start_timeout < 1) return Usage("--start_timeout must be at least 1 second");
  o.start_timeout = absl::Seconds(f.start_timeout);
  return absl::OkStatus();
}

// The shards' checkpoint folders, as the user's paths.
void ConfigureCheckpoints(const LaunchFlags& f, LaunchOptions& o) {
  o.checkpoints = f.checkpoints;
  o.checkpoints.checkpoint_dir = ResolveUserPath(f.checkpoints.checkpoint_dir, o.working_dir);
  o.checkpoints.resume = ResolveUserPath(f.checkpoints.resume, o.working_dir);
}

// The role binaries, and what every worker runs: the worker binary with the flags after --, or
// the user's own program.
absl::Status ConfigurePrograms(const LaunchFlags& f, const std::vector<std::string>& words,
                               const LauncherProcess& launcher, LaunchOptions& o) {
  const std::vector<std::string>& runfiles = launcher.runfiles_dirs;
  absl::StatusOr<std::string> scheduler =
      FindRoleBinary(Role::kScheduler, f.scheduler_binary, runfiles, o.working_dir);
  if (!scheduler.ok()) return NotUsage(scheduler.status());
  o.scheduler_binary = *scheduler;
  absl::StatusOr<std::string> shard =
      FindRoleBinary(Role::kShard, f.shard_binary, runfiles, o.working_dir);
  if (!shard.ok()) return NotUsage(shard.status());
  o.shard_binary = *shard;
  if (IsUserProgram(words)) {
    if (!f.worker_binary.empty()) {
      return Usage(absl::StrCat("--worker_binary runs with the flags after --, but '", words[0],
                                "' is a program; pass either --worker_binary and flags, or your "
                                "own command"));
    }
    absl::StatusOr<std::string> program =
        FindProgram(words[0], EnvValue(launcher.environment, "PATH"), o.working_dir);
    if (!program.ok()) return NotUsage(program.status());
    o.worker_program = *program;
    o.worker_argv = words;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> worker = FindRoleBinary(
      Role::kWorker, f.worker_binary, runfiles, o.working_dir, WorkerBinaryName(words));
  if (!worker.ok()) return NotUsage(worker.status());
  o.worker_program = *worker;
  o.worker_argv = {*worker};
  o.worker_argv.insert(o.worker_argv.end(), words.begin(), words.end());
  return absl::OkStatus();
}

// The job page the scheduler writes at the end: --report_file, else, for the worker binary,
// JOB_ID.html in the folder of the model it writes (--output; none with --output=). A program of
// the user's writes its model where it likes: its job's page only where --report_file says.
void ConfigureJobPage(const LaunchFlags& f, const std::vector<std::string>& words,
                      LaunchOptions& o) {
  if (!f.job.report_file.empty()) {
    o.scheduler.report_file = ResolveUserPath(f.job.report_file, o.working_dir);
    return;
  }
  if (IsUserProgram(words)) return;
  std::string model = "model";  // the worker's default, model.safetensors: here
  VisitFlags(words, [&](const std::string& name, const std::string& value) {
    if (name == "output") model = value;
  });
  if (model.empty()) return;
  const size_t slash = model.rfind('/');
  o.scheduler.report_file = ResolveUserPath(
      absl::StrCat(slash == std::string::npos ? "" : model.substr(0, slash + 1),
                   o.scheduler.job_id, ".html"),
      o.working_dir);
}

// --env: NAME forwards the launcher's value to other hosts; NAME=VALUE sets it too.
absl::Status ConfigureEnvironment(const LaunchFlags& f, LaunchOptions& o) {
  for (const std::string& entry : f.env) {
    const size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (name.empty()) {
      return Usage(absl::StrCat("--env '", entry, "': expected NAME or NAME=VALUE"));
    }
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
  return absl::OkStatus();
}

// Mutual TLS and a token by default over ssh; plaintext by default on this machine's loopback.
absl::Status ConfigureSecurity(const LaunchFlags& f, bool ssh, const LauncherProcess& launcher,
                               LaunchOptions& o) {
  o.tls_dir = ResolveUserPath(f.tls_dir, o.working_dir);
  o.token_file = ResolveUserPath(f.token_file, o.working_dir);
  const bool asked_for_tls = f.tls || !o.tls_dir.empty() || !o.token_file.empty();
  if (f.insecure && asked_for_tls) {
    return Usage("--insecure and --tls (or --tls_dir, --token_file) contradict each other");
  }
  o.tls = asked_for_tls || (ssh && !f.insecure);
  if (!o.tls) return absl::OkStatus();
  if (!o.tls_dir.empty() && !IsFile(absl::StrCat(o.tls_dir, "/ca.pem"))) {
    return Usage(absl::StrCat("--tls_dir ", o.tls_dir,
                              " has no ca.pem; make the files with tools/make_job_certs.sh DIR "
                              "scheduler shard worker"));
  }
  if (!o.token_file.empty() && !IsFile(o.token_file)) {
    return Usage(absl::StrCat("--token_file ", o.token_file, ": no such file"));
  }
  o.make_job_certs = f.make_job_certs;
  for (const std::string& dir : launcher.runfiles_dirs) {
    if (!o.make_job_certs.empty()) break;
    if (const std::string p = absl::StrCat(dir, "/cohort/tools/make_job_certs.sh"); IsFile(p)) {
      o.make_job_certs = p;
    }
  }
  if (o.tls_dir.empty() && o.make_job_certs.empty()) {
    return absl::NotFoundError(
        "cannot find tools/make_job_certs.sh in the launcher's runfiles; pass --make_job_certs "
        "or --tls_dir");
  }
  return absl::OkStatus();
}

// -H ARG that names no file and is not plainly a host list: a missing hosts file, which a lone
// host name could have meant too (so the way to write that is part of the message).
absl::Status NoHostsFile(absl::string_view arg) {
  const std::string shown = absl::CHexEscape(arg);
  if (absl::StrContains(arg, '/') || !CheckHostName(arg).ok()) {
    return Usage(absl::StrCat("-H ", shown, ": no such hosts file"));
  }
  return Usage(absl::StrCat("-H ", shown, ": no such hosts file (for a job on the one host ",
                            shown, ", write -H ", shown, ":1)"));
}

// -H: the hosts (a file, or a list), where each process goes, and how to reach them.
absl::Status ConfigureHosts(const LaunchFlags& f, LaunchOptions& o) {
  const std::string path = ResolveUserPath(f.hosts, o.working_dir);
  absl::StatusOr<std::vector<Host>> hosts;
  if (IsFile(path)) {
    absl::StatusOr<std::string> text = ReadWholeFile(path);
    if (!text.ok()) return Usage(text.status().message());
    hosts = ParseHostsFile(*text, f.hosts);
  } else if (IsPlainlyHostList(f.hosts)) {
    hosts = ParseHostList(f.hosts);
  } else {
    return NoHostsFile(f.hosts);
  }
  if (!hosts.ok()) return Usage(hosts.status().message());
  absl::StatusOr<Placement> placement =
      PlaceJob(*hosts, o.scheduler.num_workers, o.scheduler.num_shards, {f.scheduler_host, f.shard_hosts});
  if (!placement.ok()) return Usage(placement.status().message());
  o.hosts = *std::move(hosts);
  o.placement = *std::move(placement);
  std::set<int> used(o.placement.shards.begin(), o.placement.shards.end());
  used.insert(o.placement.workers.begin(), o.placement.workers.end());
  used.insert(o.placement.scheduler);
  const std::string scheduler_host = AddressOfHost(o.hosts[o.placement.scheduler].name);
  if (used.size() > 1 && IsLoopbackAddress(scheduler_host)) {
    return Usage(absl::StrCat(
        "the scheduler's host '", scheduler_host,
        "' is a loopback name, which the processes on the other hosts cannot reach; name it in "
        "the hosts list by an address or name every host can reach"));
  }
  o.ssh.port = f.ssh_port;
  o.ssh.identity = ResolveUserPath(f.ssh_identity, o.working_dir);
  o.ssh.extra = absl::StrSplit(f.ssh_options, ' ', absl::SkipEmpty());
  return absl::OkStatus();
}

}  // namespace

LauncherProcess ThisLauncher(const char* const* environ) {
  LauncherProcess launcher;
  for (const char* const* e = environ; *e != nullptr; ++e) launcher.environment.emplace_back(*e);
  char dir[4096];
  if (getcwd(dir, sizeof(dir)) != nullptr) launcher.current_dir = dir;
  launcher.runfiles_dirs = {EnvValue(launcher.environment, "RUNFILES_DIR")};
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    launcher.runfiles_dirs.push_back(
        absl::StrCat(absl::string_view(exe, static_cast<size_t>(n)), ".runfiles"));
  }
  launcher.cpus = AllowedCpus();
  return launcher;
}

std::string EnvValue(const std::vector<std::string>& environment, absl::string_view name) {
  for (const std::string& entry : environment) {
    if (entry.size() > name.size() && entry[name.size()] == '=' &&
        absl::StartsWith(entry, name)) {
      return entry.substr(name.size() + 1);
    }
  }
  return "";
}

std::string UserDir(const LauncherProcess& launcher) {
  const std::string dir = EnvValue(launcher.environment, "BUILD_WORKING_DIRECTORY");
  return dir.empty() ? launcher.current_dir : dir;
}

absl::StatusOr<LaunchOptions> OptionsFromFlags(const LaunchFlags& flags,
                                               const std::vector<std::string>& worker_words,
                                               const LauncherProcess& launcher) {
  absl::StatusOr<bool> ssh = UsesSsh(flags);
  if (!ssh.ok()) return ssh.status();
  LaunchOptions o;
  const std::string bazel_dir = EnvValue(launcher.environment, "BUILD_WORKING_DIRECTORY");
  if (absl::Status s = ConfigureJob(flags, bazel_dir, o); !s.ok()) return s;
  // Relative paths are relative to where the user ran the command, even under `bazel run`; the
  // children run there too (over ssh: at the same path, or in --sync_dst_dir).
  o.working_dir = bazel_dir.empty() && *ssh ? launcher.current_dir : bazel_dir;
  ConfigureCheckpoints(flags, o);
  if (absl::Status s = ConfigurePrograms(flags, worker_words, launcher, o); !s.ok()) return s;
  ConfigureJobPage(flags, worker_words, o);
  o.environment = launcher.environment;
  if (absl::Status s = ConfigureEnvironment(flags, o); !s.ok()) return s;
  if (absl::Status s = ConfigureSecurity(flags, *ssh, launcher, o); !s.ok()) return s;
  if (*ssh) {
    if (absl::Status s = ConfigureHosts(flags, o); !s.ok()) return s;
  }
  o.cpus = launcher.cpus;
  const std::string tmpdir = EnvValue(launcher.environment, "TMPDIR");
  o.temp_root = tmpdir.empty() ? "/tmp" : tmpdir;
  return o;
}

absl::StatusOr<std::optional<std::string>> CheckWorkerFlags(const LaunchOptions& o) {
  SpawnOptions check;
  check.path = o.worker_program;
  check.argv = o.worker_argv;
  check.argv.insert(check.argv.begin() + 1, "--validate_only");
  // The data is this machine's only when the workers run here.
  if (o.hosts.empty()) {
    check.argv.insert(check.argv.begin() + 2,
                      absl::StrCat("--validate_data=", o.scheduler.num_workers));
  }
  check.env = o.environment;
  check.working_dir = o.working_dir;
  absl::StatusOr<CompletedProcess> done = RunToCompletion(check, absl::Seconds(60));
  if (!done.ok()) {
    return NotUsage(absl::Status(done.status().code(),
                                 absl::StrCat("checking the workers' flags: ",
                                              done.status().message())));
  }
  if (ExitCodeOf(done->wait_status) == 0) return std::nullopt;
  return done->output;
}

// The workers' data, each host's share of it (data_sync.h), and the workers pointed at it.
absl::Status SyncDataToHosts(LaunchOptions& o, const std::string& dst_dir, std::ostream& out) {
  ASSIGN_OR_RETURN(const std::optional<DataSyncPlan> plan,
                   PlanDataSync(o.worker_argv, o.working_dir, dst_dir, o.placement,
                                static_cast<int>(o.hosts.size())));
  if (!plan.has_value()) return absl::OkStatus();
  out << "launch: copying the data of " << plan->summary << " to " << plan->root << "\n"
      << std::flush;
  RETURN_IF_ERROR(ForEachHost(static_cast<int>(o.hosts.size()), [&](int h) -> absl::Status {
    if (plan->files_by_host[h].empty()) return absl::OkStatus();
    char list[] = "/tmp/cohort-data-files-XXXXXX";
    const int fd = mkstemp(list);
    if (fd < 0) return absl::InternalError(absl::StrCat("mkstemp: ", strerror(errno)));
    std::string text;
    for (const std::string& path : plan->files_by_host[h]) absl::StrAppend(&text, path.substr(1), "\n");
    const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    absl::Status copied =
        written ? RunSync(FileListSyncCommand(o.ssh, o.hosts[h].name, list, plan->root),
                          o.hosts[h].name, "the data", o.environment)
                : absl::InternalError(absl::StrCat("cannot write ", list));
    unlink(list);
    return copied;
  }));
  // The last of a flag's values counts.
  o.worker_argv.push_back(absl::StrCat("--dataset=", plan->dataset));
  o.worker_argv.push_back(absl::StrCat("--eval_dataset=", plan->eval_dataset));
  return absl::OkStatus();
}

absl::Status SyncJobToHosts(LaunchOptions& o, const std::string& dst_dir,
                            const std::vector<std::string>& worker_words, std::ostream& out) {
  if (dst_dir[0] != '/') {
    return Usage(absl::StrCat("--sync_dst_dir ", dst_dir,
                              ": give an absolute path (it is a folder on every host)"));
  }
  SyncPlan plan;
  plan.working_dir = o.working_dir;
  plan.dst_dir = dst_dir;
  plan.programs = {o.scheduler_binary, o.shard_binary};
  // A program found on the PATH is the host's own (python3): it is not copied.
  const bool copy_worker =
      !IsUserProgram(worker_words) || absl::StrContains(worker_words[0], '/');
  if (copy_worker) plan.programs.push_back(o.worker_program);
  std::set<std::string> names;
  for (int h : o.placement.workers) names.insert(o.hosts[h].name);
  for (int h : o.placement.shards) names.insert(o.hosts[h].name);
  names.insert(o.hosts[o.placement.scheduler].name);
  std::vector<Host> used;
  for (const Host& h : o.hosts) {
    if (names.count(h.name) > 0) used.push_back(h);
  }
  out << "launch: copying " << o.working_dir << " and " << plan.programs.size()
      << " programs to " << dst_dir << " on " << used.size() << " host(s)\n"
      << std::flush;
  if (absl::Status s = SyncToHosts(plan, o.ssh, used, o.environment); !s.ok()) {
    return NotUsage(s);
  }
  if (absl::Status s = SyncDataToHosts(o, dst_dir, out); !s.ok()) return NotUsage(s);
  const std::vector<std::string> synced = SyncedPrograms(plan);
  o.scheduler_binary = synced[0];
  o.shard_binary = synced[1];
  if (copy_worker) {
    o.worker_program = synced[2];
    if (!IsUserProgram(worker_words)) o.worker_argv[0] = synced[2];
  }
  o.working_dir = dst_dir;
  return absl::OkStatus();
}

}  // namespace cohort::launch
