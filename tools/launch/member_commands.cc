#include "tools/launch/member_commands.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/launch/hosts.h"
#include "tools/launch/remote.h"

namespace cohort::launch {
namespace {

constexpr char kAnyAddress[] = "0.0.0.0";

}  // namespace

int HostOf(const LaunchOptions& options, Role role, int rank) {
  if (options.hosts.empty()) return -1;
  switch (role) {
    case Role::kScheduler:
      return options.placement.scheduler;
    case Role::kShard:
      return options.placement.shards[rank];
    case Role::kWorker:
      return options.placement.workers[rank];
  }
  return -1;
}

std::string RunFolderOf(const LaunchOptions& options, const std::string& scratch_dir, Role role,
                        int rank) {
  return HostOf(options, role, rank) < 0
             ? scratch_dir
             : absl::StrCat("/tmp/cohort-", options.scheduler.job_id, "-", RoleName(role), "-", rank);
}

std::string MetricsPortFileName(Role role, int rank) {
  return absl::StrCat(RoleName(role), "-", rank, "-metrics.port");
}

std::vector<std::string> SchedulerArgv(const LaunchOptions& options, int port) {
  std::vector<std::string> argv = {options.scheduler_binary, absl::StrCat("--port=", port)};
  for (std::string& arg : options.scheduler.ToArgs()) argv.push_back(std::move(arg));
  return argv;
}

std::vector<std::string> ShardArgv(const LaunchOptions& options,
                                   const std::string& scheduler_address, int rank, bool resume) {
  std::vector<std::string> argv = {options.shard_binary,
                                   absl::StrCat("--scheduler=", scheduler_address),
                                   absl::StrCat("--rank=", rank)};
  for (std::string& arg : resume ? options.checkpoints.ToArgsForRestart()
                                 : options.checkpoints.ToArgs()) {
    argv.push_back(std::move(arg));
  }
  return argv;
}

MemberCommand MemberCommandOf(const LaunchOptions& o, const std::string& scratch_dir,
                              const std::string& scheduler_address, Role role, int rank,
                              const std::string& program, std::vector<std::string> argv) {
  const int host = HostOf(o, role, rank);
  const std::string folder = RunFolderOf(o, scratch_dir, role, rank);
  const std::string metrics_port_file =
      absl::StrCat(folder, "/", MetricsPortFileName(role, rank));
  // Remote members listen on every address (their peers are elsewhere), with TLS.
  const std::string bind = host < 0 ? kLoopback : kAnyAddress;
  const std::string tls_dir = !o.tls ? "" : host < 0 ? o.tls_dir : folder;
  const std::string token_file =
      !o.tls ? "" : host < 0 ? o.token_file : absl::StrCat(folder, "/token");
  if (role != Role::kWorker) {
    argv.push_back(absl::StrCat("--bind=", bind));
    argv.push_back(absl::StrCat("--metrics_port_file=", metrics_port_file));
    if (o.tls) {
      argv.push_back(absl::StrCat("--tls_dir=", tls_dir));
      argv.push_back(absl::StrCat("--token_file=", token_file));
    } else {
      argv.push_back("--insecure");
    }
  }
  if (role == Role::kScheduler) {
    argv.push_back(absl::StrCat("--port_file=", folder, "/", kSchedulerPortFile));
    argv.push_back(absl::StrCat("--journal=", folder, "/", kSchedulerJournal));
  }
  // Workers dial a remote shard at its host's address in the hosts file, which the other hosts
  // reach, not wherever the scheduler sees it come from.
  if (role == Role::kShard && host >= 0) {
    argv.push_back(absl::StrCat("--advertise_address=", AddressOfHost(o.hosts[host].name)));
  }
  JobEnvSpec env;
  env.job_id = o.scheduler.job_id;
  env.role = role;
  env.rank = rank;
  env.num_workers = o.scheduler.num_workers;
  env.num_shards = o.scheduler.num_shards;
  env.mode = o.scheduler.mode;
  env.scheduler_address = scheduler_address;
  if (host < 0) env.cpus = o.cpus;
  env.metrics_bind = bind;
  env.metrics_port_file = metrics_port_file;
  env.tls_dir = tls_dir;
  env.token_file = token_file;
  MemberCommand command;
  if (host < 0) {
    command.spawn.path = program;
    command.spawn.argv = std::move(argv);
    command.spawn.env = JobEnvironment(o.environment, env);
    command.spawn.working_dir = o.working_dir;
    return command;
  }
  RemoteMember remote;
  remote.run_dir = folder;
  remote.working_dir = o.working_dir;
  if (role == Role::kWorker) {
    remote.workers_on_host = static_cast<int>(
        std::count(o.placement.workers.begin(), o.placement.workers.end(), host));
  }
  remote.env = RemoteEnvironment(JobEnvironment(o.environment, env), o.forwarded_env);
  remote.argv = std::move(argv);
  remote.argv[0] = program;
  command.spawn.path = o.ssh.binary;
  command.spawn.argv = SshArgv(o.ssh, o.hosts[host].name, RemoteCommand(remote));
  command.spawn.env = o.environment;
  command.spawn.stdin_pipe = true;
  command.host = AddressOfHost(o.hosts[host].name);
  if (o.tls) {
    const std::string name = RoleName(role);
    command.run_dir_files = {{"ca.pem", absl::StrCat(o.tls_dir, "/ca.pem")},
                             {name + ".pem", absl::StrCat(o.tls_dir, "/", name, ".pem")},
                             {name + ".key", absl::StrCat(o.tls_dir, "/", name, ".key")},
                             {"token", o.token_file}};
  }
  return command;
}

}  // namespace cohort::launch
