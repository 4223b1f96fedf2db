#include "tools/launch/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/launch/child_process.h"
#include "services/common/port_file.h"
#include "tools/launch/job_env.h"
#include "tools/launch/metrics_targets.h"
#include "tools/launch/line_prefixer.h"
#include "tools/launch/remote.h"
#include "tools/launch/signal_fd.h"

namespace cohort::launch {
namespace {

// How long the others may take to end on their own after a process failed (+ linger), and after
// every worker finished (+ linger).
constexpr absl::Duration kEndAfterFailure = absl::Seconds(3);
// After the scheduler failed: members first wait out their grace for it (--scheduler_grace,
// 3 s by default), then say they lost it and exit.
constexpr absl::Duration kEndAfterSchedulerLoss = absl::Seconds(6);  // 3 s + kEndAfterFailure
constexpr absl::Duration kEndAfterWorkers = absl::Seconds(10);
// From SIGTERM to SIGKILL, when the launcher stops the job and when the user interrupts it.
constexpr absl::Duration kTermGrace = absl::Seconds(2);
// With hosts: a remote member's wrapper needs up to 2 s itself, and its last words travel back.
constexpr absl::Duration kRemoteTermGrace = absl::Seconds(4);
constexpr absl::Duration kInterruptGrace = absl::Seconds(5);
// Once every child has ended, how long to wait for the rest of their output.
constexpr absl::Duration kOutputDrain = absl::Seconds(1);
// The longest poll, so a missed wake-up costs little; and how often to look for the port file.
constexpr absl::Duration kMaxPoll = absl::Milliseconds(250);
constexpr absl::Duration kPortFilePoll = absl::Milliseconds(20);
// Reads per stream per loop turn, so one chatty child cannot starve the others.
constexpr int kMaxReadsPerTurn = 16;
// --restart_failed_shards: the restarts per shard rank, and how long the scheduler waits for one.
constexpr int kMaxShardRestarts = 3;
constexpr absl::Duration kShardRestartGrace = absl::Seconds(60);
// --restart_scheduler: the scheduler's restarts.
constexpr int kMaxSchedulerRestarts = 3;
// --restart_failed_workers (elastic jobs): new workers started in place of dead ones, in all.
constexpr int kMaxWorkerRestarts = 100;

constexpr char kLoopback[] = "127.0.0.1";
constexpr char kSchedulerPortFile[] = "scheduler.port";
constexpr char kAnyAddress[] = "0.0.0.0";

// Writes all of `text`, whatever the descriptor takes at a time. Errors are dropped: a closed
// stdout must not stop the launcher from supervising its children.
void WriteAll(int fd, absl::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// "1 shard", "2 shards", "1 process", "4 processes".
std::string Count(size_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : absl::EndsWith(noun, "s") ? "es" : "s");
}

// "[worker 1] " or, on another host, "[node2 worker 1] ".
std::string PrefixOf(absl::string_view name, absl::string_view host) {
  return absl::StrCat("[", host, host.empty() ? "" : " ", name, "] ");
}

// One process of the job.
struct Member {
  Member(Role role, int rank, std::string host, std::unique_ptr<ChildProcess> process)
      : role(role),
        rank(rank),
        name(role == Role::kScheduler ? "scheduler" : absl::StrCat(RoleName(role), " ", rank)),
        host(std::move(host)),
        process(std::move(process)),
        prefixers{LinePrefixer(PrefixOf(name, this->host)),
                  LinePrefixer(PrefixOf(name, this->host))} {}

  bool remote() const { return !host.empty(); }
  std::string Describe() const {
    return remote() ? absl::StrCat(name, " on ", host, " (ssh pid ", process->pid(), ")")
                    : absl::StrCat(name, " (pid ", process->pid(), ")");
  }

  const Role role;
  const int rank;
  const std::string name;  // "scheduler", "shard 0", "worker 1"
  const std::string host;  // where it runs, as the hosts list names it; empty: here
  const std::unique_ptr<ChildProcess> process;
  LinePrefixer prefixers[2];  // by ChildProcess::Stream
  std::map<std::string, int> ports;  // the port files a remote wrapper announced, by name
};

class Job {
 public:
  Job(const LaunchOptions& options, SignalFd& signals, std::string scratch_dir)
      : o_(options), signals_(signals), scratch_dir_(std::move(scratch_dir)) {}

  int Run() {
    if (!Spawn(Role::kScheduler, 0, o_.scheduler_binary, SchedulerArgv(0))) return 1;
    deadline_ = absl::Now() + o_.start_timeout;

    while (std::any_of(members_.begin(), members_.end(),
                       [](const auto& m) { return !m->process->reaped(); })) {
      Wait();
      Beat();
      for (int sig : signals_.Read()) {
        if (sig == SIGINT || sig == SIGTERM) Interrupt(sig);
      }
      for (auto& m : members_) {
        ReadOutput(*m);
        if (!m->process->reaped() && m->process->TryReap()) {
          ReadOutput(*m);  // what it wrote before it ended comes before the news of its end
          OnExit(*m);
        }
      }
      RestartMembers();
      if (phase_ == Phase::kStarting) CheckSchedulerPort();
      CheckMetricsPorts();
      if (deadline_.has_value() && absl::Now() >= *deadline_) OnDeadline();
    }
    if (targets_written_) unlink(o_.metrics_targets.c_str());
    // Whatever a child left behind in its process group goes with it.
    for (auto& m : members_) m->process->SignalGroup(SIGKILL);
    DrainOutput();

    const int status = interrupted_ != 0 ? 128 + interrupted_ : failure_.value_or(0);
    if (interrupted_ != 0) {
      Say(absl::StrCat("job ", o_.job_id, " interrupted"));
    } else if (status == 0) {
      Say(absl::StrCat("job ", o_.job_id, " finished"));
    } else {
      Say(absl::StrCat("job ", o_.job_id, " failed (exit status ", status, ")"));
    }
    return status;
  }

 private:
  enum class Phase {
    kStarting,     // the scheduler runs; waiting for its port file
    kRunning,      // everyone started
    kEnding,       // a process failed or the workers finished: the others end on their own
    kTerminating,  // SIGTERM sent
    kKilling,      // SIGKILL sent
  };

  void Say(absl::string_view message) {
    WriteAll(o_.output_fd, absl::StrCat("launch: ", message, "\n"));
  }

  // The host a member runs on (its index in o_.hosts), or -1 for this machine.
  int HostOf(Role role, int rank) const {
    if (o_.hosts.empty()) return -1;
    switch (role) {
      case Role::kScheduler:
        return o_.placement.scheduler;
      case Role::kShard:
        return o_.placement.shards[rank];
      case Role::kWorker:
        return o_.placement.workers[rank];
    }
    return -1;
  }

  // Where a member's port files go: the scratch folder here, its run folder on a host (which
  // its wrapper makes, fills and removes).
  std::string FolderOf(Role role, int rank) const {
    return HostOf(role, rank) < 0
               ? scratch_dir_
               : absl::StrCat("/tmp/cohort-", o_.job_id, "-", RoleName(role), "-", rank);
  }
  static std::string MetricsPortFileName(Role role, int rank) {
    return absl::StrCat(RoleName(role), "-", rank, "-metrics.port");
  }

  // Starts one member, or says why it could not. argv: argv[0] and the program's own flags;
  // where it listens, its port files and its security are added here.
  bool Spawn(Role role, int rank, const std::string& program, std::vector<std::string> argv) {
    const int host = HostOf(role, rank);
    const std::string folder = FolderOf(role, rank);
    const std::string metrics_port_file =
        absl::StrCat(folder, "/", MetricsPortFileName(role, rank));
    // Remote members listen on every address (their peers are elsewhere), with TLS.
    const std::string bind = host < 0 ? kLoopback : kAnyAddress;
    const std::string tls_dir = !o_.tls ? "" : host < 0 ? o_.tls_dir : folder;
    const std::string token_file =
        !o_.tls ? "" : host < 0 ? o_.token_file : absl::StrCat(folder, "/token");
    if (role != Role::kWorker) {
      argv.push_back(absl::StrCat("--bind=", bind));
      argv.push_back(absl::StrCat("--metrics_port_file=", metrics_port_file));
      if (o_.tls) {
        argv.push_back(absl::StrCat("--tls_dir=", tls_dir));
        argv.push_back(absl::StrCat("--token_file=", token_file));
      } else {
        argv.push_back("--insecure");
      }
    }
    if (role == Role::kScheduler) {
      argv.push_back(absl::StrCat("--port_file=", folder, "/", kSchedulerPortFile));
    }
    // Workers dial a remote shard at its host's address in the hosts file, which the other hosts
    // reach, not wherever the scheduler sees it come from.
    if (role == Role::kShard && host >= 0) {
      argv.push_back(absl::StrCat("--advertise_address=", AddressOfHost(o_.hosts[host].name)));
    }
    JobEnvSpec env;
    env.job_id = o_.job_id;
    env.role = role;
    env.rank = rank;
    env.num_workers = o_.num_workers;
    env.num_shards = o_.num_shards;
    env.mode = o_.mode;
    env.scheduler_address = scheduler_address_;
    env.cores = host < 0 ? o_.cores : 0;
    env.metrics_bind = bind;
    env.metrics_port_file = metrics_port_file;
    env.tls_dir = tls_dir;
    env.token_file = token_file;
    SpawnOptions spawn;
    std::string run_dir_files;
    if (host < 0) {
      spawn.path = program;
      spawn.argv = std::move(argv);
      spawn.env = JobEnvironment(o_.environment, env);
      spawn.working_dir = o_.working_dir;
    } else {
      RemoteMember remote;
      remote.run_dir = folder;
      remote.working_dir = o_.working_dir;
      if (role == Role::kWorker) {
        remote.workers_on_host = static_cast<int>(
            std::count(o_.placement.workers.begin(), o_.placement.workers.end(), host));
      }
      remote.env = RemoteEnvironment(JobEnvironment(o_.environment, env), o_.forwarded_env);
      remote.argv = std::move(argv);
      remote.argv[0] = program;
      absl::StatusOr<std::string> files = CredentialsFor(role);
      if (!files.ok()) {
        Say(absl::StrCat("cannot start the ", RoleName(role), ": ", files.status().message()));
        return false;
      }
      run_dir_files = *std::move(files);
      spawn.path = o_.ssh.binary;
      spawn.argv = SshArgv(o_.ssh, o_.hosts[host].name, RemoteCommand(remote));
      spawn.env = o_.environment;
      spawn.stdin_pipe = true;
    }
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(spawn);
    if (!child.ok()) {
      Say(absl::StrCat("cannot start the ", RoleName(role),
                       role == Role::kScheduler ? "" : absl::StrCat(" of rank ", rank), ": ",
                       child.status().message()));
      return false;
    }
    // A few KB into an empty pipe: written whole at once.
    if (!run_dir_files.empty() &&
        write((*child)->stdin_fd(), run_dir_files.data(), run_dir_files.size()) !=
            static_cast<ssize_t>(run_dir_files.size())) {
      Say(absl::StrCat("cannot send the ", RoleName(role), " of rank ", rank,
                       " its files: ", strerror(errno)));
      return false;
    }
    members_.push_back(std::make_unique<Member>(
        role, rank, host < 0 ? "" : AddressOfHost(o_.hosts[host].name), *std::move(child)));
    return true;
  }

  // What a remote member's wrapper writes into its run folder: with TLS, the job's CA, the
  // role's certificate and key, and the token.
  absl::StatusOr<std::string> CredentialsFor(Role role) {
    std::vector<std::pair<std::string, std::string>> files;
    if (o_.tls) {
      const std::string name = RoleName(role);
      for (const auto& [file, path] :
           std::vector<std::pair<std::string, std::string>>{
               {"ca.pem", absl::StrCat(o_.tls_dir, "/ca.pem")},
               {name + ".pem", absl::StrCat(o_.tls_dir, "/", name, ".pem")},
               {name + ".key", absl::StrCat(o_.tls_dir, "/", name, ".key")},
               {"token", o_.token_file}}) {
        absl::StatusOr<std::string> contents = ReadWholeFile(path);
        if (!contents.ok()) return contents.status();
        files.emplace_back(file, *std::move(contents));
      }
    }
    return RunDirFiles(files);
  }

  // Every kRemoteHeartbeat, a line to each remote member's wrapper: it stops its process when
  // they stop coming (remote.h).
  void Beat() {
    const absl::Time now = absl::Now();
    if (now < next_beat_) return;
    next_beat_ = now + kRemoteHeartbeat;
    for (const auto& m : members_) {
      // A full pipe (EAGAIN) means the host is slow to read, not gone: the next beat retries.
      if (m->process->stdin_fd() >= 0) (void)!write(m->process->stdin_fd(), "\n", 1);
    }
  }

  // Sleeps until output, a signal or the next deadline.
  void Wait() {
    std::vector<pollfd> fds = {{signals_.fd(), POLLIN, 0}};
    for (const auto& m : members_) {
      for (int s = 0; s < 2; ++s) {
        const int fd = m->process->fd(static_cast<ChildProcess::Stream>(s));
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
      }
    }
    absl::Duration timeout = phase_ == Phase::kStarting ? kPortFilePoll : kMaxPoll;
    if (deadline_.has_value()) {
      timeout = std::max(absl::ZeroDuration(), std::min(timeout, *deadline_ - absl::Now()));
    }
    // EINTR needs no handling: the caller looks at everything after each wake-up anyway.
    poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(timeout)) + 1);
  }

  // Copies what a member's pipes hold now to the output, line by line; closes them at EOF.
  void ReadOutput(Member& m) {
    char buffer[16384];
    std::string lines;
    for (int s = 0; s < 2; ++s) {
      const auto stream = static_cast<ChildProcess::Stream>(s);
      for (int i = 0; i < kMaxReadsPerTurn && m.process->fd(stream) >= 0; ++i) {
        const ssize_t n = read(m.process->fd(stream), buffer, sizeof(buffer));
        if (n > 0) {
          std::vector<std::string> control;
          m.prefixers[s].Feed(absl::string_view(buffer, static_cast<size_t>(n)), &lines,
                              m.remote() ? &control : nullptr);
          for (const std::string& line : control) {
            if (auto port = ParsePortAnnouncement(line); port.has_value()) {
              m.ports[port->file] = port->port;
            }
          }
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          m.prefixers[s].Flush(&lines);
          m.process->Close(stream);
        } else if (errno == EAGAIN) {
          break;
        }
      }
    }
    WriteAll(o_.output_fd, lines);
  }

  // After every child ended: what is still in (or still coming through) the pipes.
  void DrainOutput() {
    const absl::Time until = absl::Now() + kOutputDrain;
    auto open = [this] {
      return std::any_of(members_.begin(), members_.end(), [](const auto& m) {
        return m->process->fd(ChildProcess::Stream::kStdout) >= 0 ||
               m->process->fd(ChildProcess::Stream::kStderr) >= 0;
      });
    };
    while (open() && absl::Now() < until) {
      std::vector<pollfd> fds;
      for (const auto& m : members_) {
        for (int s = 0; s < 2; ++s) {
          const int fd = m->process->fd(static_cast<ChildProcess::Stream>(s));
          if (fd >= 0) fds.push_back({fd, POLLIN, 0});
        }
      }
      poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(kMaxPoll)));
      for (auto& m : members_) ReadOutput(*m);
    }
    std::string lines;
    for (auto& m : members_) {
      for (int s = 0; s < 2; ++s) {
        m->prefixers[s].Flush(&lines);
        m->process->Close(static_cast<ChildProcess::Stream>(s));
      }
    }
    WriteAll(o_.output_fd, lines);
  }

  void OnExit(const Member& m) {
    if (phase_ == Phase::kTerminating || phase_ == Phase::kKilling) return;  // we stopped it
    const int status = m.process->wait_status();
    // Only a death is restarted (a signal: SIGKILL, the OOM killer, a crash); a process that
    // exits with an error (the job failed) is not.
    const bool died = WIFSIGNALED(status) && phase_ == Phase::kRunning && !m.remote();
    if (died && m.role == Role::kScheduler && o_.restart_scheduler &&
        ++scheduler_restarts_ <= kMaxSchedulerRestarts) {
      Say(absl::StrCat(m.Describe(), " ", DescribeWaitStatus(status), "; restarting it at ",
                       scheduler_address_, " (restart ", scheduler_restarts_, " of at most ",
                       kMaxSchedulerRestarts, ")"));
      restart_scheduler_ = true;
      return;
    }
    if (died && m.role == Role::kShard && o_.restart_failed_shards &&
        ++shard_restarts_[m.rank] <= kMaxShardRestarts) {
      Say(absl::StrCat(m.Describe(), " ", DescribeWaitStatus(status), "; restarting it from the "
                       "newest complete checkpoint in ", o_.checkpoint_dir, " (restart ",
                       shard_restarts_[m.rank], " of at most ", kMaxShardRestarts, ")"));
      to_restart_.push_back(m.rank);
      return;
    }
    if (died && m.role == Role::kWorker && o_.elastic) {
      const bool restart = o_.restart_failed_workers && ++worker_restarts_ <= kMaxWorkerRestarts;
      Say(absl::StrCat(m.Describe(), " ", DescribeWaitStatus(status),
                       "; the job goes on without it (--on_worker_failure=elastic)",
                       restart ? absl::StrCat("; starting worker ", next_worker_, " to join it")
                               : ""));
      if (restart) ++workers_to_start_;
      return;
    }
    if (status != 0) {
      // ssh's own status when it cannot reach the host or loses it (a program's is passed on).
      const bool ssh_failed = m.remote() && ExitCodeOf(status) == 255;
      Say(absl::StrCat(m.Describe(), " ", DescribeWaitStatus(status),
                       phase_ == Phase::kStarting ? " before it wrote its port file" : "",
                       ssh_failed ? " (ssh's status: the host could not be reached, refused the "
                                    "login, or the connection to it was lost; see above)"
                                  : ""));
      Fail(ExitCodeOf(status), absl::StrCat(m.name, " failed"),
           m.role == Role::kScheduler ? kEndAfterSchedulerLoss : kEndAfterFailure);
      return;
    }
    if (m.role == Role::kScheduler && phase_ == Phase::kStarting) {
      Say(absl::StrCat(m.Describe(), " exited before it wrote its port file"));
      Fail(1, "the scheduler ended", kEndAfterFailure);
    } else if (m.role == Role::kScheduler) {
      EndWithin(kEndAfterWorkers, "the scheduler ended");
    } else if (m.role == Role::kWorker && AllWorkersSucceeded()) {
      EndWithin(kEndAfterWorkers, "every worker finished");
    }
  }

  // port: 0 for the system to pick one.
  std::vector<std::string> SchedulerArgv(int port) const {
    std::vector<std::string> argv = {
        o_.scheduler_binary,
        absl::StrCat("--port=", port),
        absl::StrCat("--num_workers=", o_.num_workers),
        absl::StrCat("--num_shards=", o_.num_shards),
        absl::StrCat("--mode=", o_.mode),
        absl::StrCat("--linger=", o_.linger_s),
        absl::StrCat("--job_id=", o_.job_id),
        absl::StrCat("--baseline_images_per_second=", o_.baseline_images_per_second)};
    if (o_.restart_failed_shards) {
      argv.push_back(
          absl::StrCat("--shard_restart_grace=", absl::ToDoubleSeconds(kShardRestartGrace)));
    }
    if (o_.elastic) {
      argv.push_back("--on_worker_failure=elastic");
      argv.push_back(absl::StrCat("--min_workers=", o_.min_workers));
      argv.push_back(absl::StrCat("--max_workers=", o_.max_workers > 0 ? o_.max_workers
                                                                       : o_.num_workers));
    }
    return argv;
  }

  // Starts again the members OnExit chose: the scheduler at its port (the members register
  // with it again), shards from the checkpoint (the scheduler waits for them).
  void RestartMembers() {
    const bool scheduler = restart_scheduler_;
    std::vector<int> shards;
    shards.swap(to_restart_);
    restart_scheduler_ = false;
    if (phase_ != Phase::kRunning) return;  // something else failed meanwhile: the job ends
    if (scheduler) {
      ForgetMetricsPort(Role::kScheduler, 0);
      if (!Spawn(Role::kScheduler, 0, o_.scheduler_binary, SchedulerArgv(scheduler_port_))) {
        return Abort();
      }
    }
    for (int rank : shards) {
      ForgetMetricsPort(Role::kShard, rank);
      std::vector<std::string> argv = ShardArgv(rank);
      argv.push_back(absl::StrCat("--resume=", o_.checkpoint_dir));
      if (!Spawn(Role::kShard, rank, o_.shard_binary, argv)) return Abort();
    }
    // The scheduler gives a joining worker its rank; the launcher numbers it for its output.
    for (; workers_to_start_ > 0; --workers_to_start_) {
      if (!Spawn(Role::kWorker, next_worker_++, o_.worker_program, o_.worker_argv)) {
        return Abort();
      }
    }
  }

  // A restarted member writes its new port: the old one is no target any more.
  void ForgetMetricsPort(Role role, int rank) {
    const std::string file = absl::StrCat(FolderOf(role, rank), "/", MetricsPortFileName(role, rank));
    unlink(file.c_str());
    metrics_ports_.erase(role == Role::kScheduler ? std::string("scheduler")
                                                  : absl::StrCat(RoleName(role), " ", rank));
  }

  std::vector<std::string> ShardArgv(int rank) const {
    std::vector<std::string> argv = {o_.shard_binary,
                                     absl::StrCat("--scheduler=", scheduler_address_),
                                     absl::StrCat("--rank=", rank)};
    argv.insert(argv.end(), o_.shard_flags.begin(), o_.shard_flags.end());
    return argv;
  }

  // Elastic: every worker has ended, some finished and the others died.
  bool AllWorkersSucceeded() const {
    int done = 0, running = 0;
    for (const auto& m : members_) {
      if (m->role != Role::kWorker) continue;
      if (!m->process->reaped()) {
        ++running;
      } else if (m->process->wait_status() == 0) {
        ++done;
      }
    }
    return o_.elastic ? running == 0 && done > 0 : done == o_.num_workers;
  }

  // Records the job's status (the first failure's) and lets the others end on their own
  // within linger + extra.
  void Fail(int exit_code, std::string why, absl::Duration extra) {
    if (!failure_.has_value()) failure_ = exit_code;
    EndWithin(extra, std::move(why));
  }

  // The remaining processes get linger + `extra` to end on their own (the scheduler tells them
  // to stop), unless an earlier end is set already.
  void EndWithin(absl::Duration extra, std::string why) {
    if (phase_ == Phase::kTerminating || phase_ == Phase::kKilling) return;
    const absl::Time now = absl::Now();
    const absl::Time end = now + absl::Seconds(o_.linger_s) + extra;
    if (phase_ != Phase::kEnding || end < *deadline_) {
      deadline_ = end;
      ending_wait_ = end - now;
      ending_why_ = std::move(why);
    }
    phase_ = Phase::kEnding;
  }

  // Stops the job now: something it needs went wrong.
  void Abort() {
    if (!failure_.has_value()) failure_ = 1;
    Terminate(o_.hosts.empty() ? kTermGrace : kRemoteTermGrace);
  }

  void Interrupt(int sig) {
    if (interrupted_ != 0 || phase_ == Phase::kKilling) {
      Say(absl::StrCat("interrupted again; killing ", Count(Running().size(), "process")));
      Kill();
      return;
    }
    interrupted_ = sig;
    Say(absl::StrCat("interrupted; stopping ", Count(Running().size(), "process")));
    Terminate(kInterruptGrace);
  }

  void OnDeadline() {
    switch (phase_) {
      case Phase::kStarting:
        Say(absl::StrFormat(
            "the scheduler did not write its port file %s/%s within %s; stopping the job (see "
            "the scheduler's output above)",
            FolderOf(Role::kScheduler, 0), kSchedulerPortFile,
            absl::FormatDuration(o_.start_timeout)));
        Abort();
        break;
      case Phase::kEnding:
        Say(absl::StrCat(NamesOf(Running()), " still running ", absl::FormatDuration(ending_wait_),
                         " after ", ending_why_, "; sending SIGTERM"));
        Abort();
        break;
      case Phase::kTerminating:
        Say(absl::StrCat(NamesOf(Running()), " still running after SIGTERM; sending SIGKILL"));
        Kill();
        break;
      case Phase::kRunning:
      case Phase::kKilling:
        deadline_.reset();
        break;
    }
  }

  // SIGTERM, or for a remote member the end of its stdin: its wrapper stops it, and its last
  // output still comes back.
  void Terminate(absl::Duration grace) {
    for (const Member* m : Running()) {
      if (m->remote()) {
        m->process->CloseStdin();
      } else {
        m->process->SignalGroup(SIGTERM);
      }
    }
    phase_ = Phase::kTerminating;
    deadline_ = absl::Now() + grace;
  }

  void Kill() {
    for (const Member* m : Running()) m->process->SignalGroup(SIGKILL);
    phase_ = Phase::kKilling;
    deadline_.reset();
  }

  std::vector<const Member*> Running() const {
    std::vector<const Member*> out;
    for (const auto& m : members_) {
      if (!m->process->reaped()) out.push_back(m.get());
    }
    return out;
  }

  static std::string NamesOf(const std::vector<const Member*>& members) {
    return absl::StrJoin(members, ", ",
                         [](std::string* out, const Member* m) { out->append(m->Describe()); });
  }

  // The port a member wrote to its port file `name`, once it has: read here, or announced by
  // its remote wrapper.
  absl::StatusOr<std::optional<int>> PortOf(const Member& m, const std::string& name) const {
    if (!m.remote()) return ReadPortFile(absl::StrCat(scratch_dir_, "/", name));
    const auto it = m.ports.find(name);
    return it == m.ports.end() ? std::nullopt : std::optional<int>(it->second);
  }

  // Once the scheduler has written its port: starts the shards, then the workers.
  void CheckSchedulerPort() {
    absl::StatusOr<std::optional<int>> port = PortOf(*members_.front(), kSchedulerPortFile);
    if (!port.ok()) {
      Say(absl::StrCat("the scheduler's ", port.status().message(), "; stopping the job"));
      Abort();
      return;
    }
    if (!port->has_value()) return;  // not yet: it is written once the scheduler listens
    StartMembers(**port);
  }

  // Adds the metrics ports that appeared to the file_sd list and rewrites it.
  void CheckMetricsPorts() {
    const size_t live = std::count_if(members_.begin(), members_.end(),
                                      [](const auto& m) { return !m->process->reaped(); });
    if (o_.metrics_targets.empty() || metrics_ports_.size() >= live) return;
    bool found = false;
    for (const auto& m : members_) {
      if (metrics_ports_.count(m->name) > 0) continue;
      absl::StatusOr<std::optional<int>> port = PortOf(*m, MetricsPortFileName(m->role, m->rank));
      if (!port.ok() || !port->has_value()) continue;
      metrics_ports_[m->name] = **port;
      found = true;
    }
    if (!found) return;
    std::vector<MetricsTarget> targets;
    for (const auto& m : members_) {
      if (m->process->reaped()) continue;  // gone (a restarted shard's first process)
      auto it = metrics_ports_.find(m->name);
      if (it == metrics_ports_.end()) continue;
      targets.push_back({absl::StrCat(m->remote() ? m->host : kLoopback, ":", it->second),
                         o_.job_id, m->role, m->rank});
    }
    if (absl::Status s = WriteFileAtomically(o_.metrics_targets, FileSdTargets(targets));
        !s.ok()) {
      Say(absl::StrCat("cannot write the metrics targets: ", s.message()));
      return;
    }
    if (!targets_written_) Say(absl::StrCat("Prometheus targets of the job in ", o_.metrics_targets));
    targets_written_ = true;
  }

  void StartMembers(int port) {
    const Member& scheduler = *members_.front();
    // With hosts, the address the hosts list gives the scheduler's host (checked in main not to
    // be a loopback address when the job spans hosts).
    scheduler_address_ = absl::StrCat(scheduler.remote() ? scheduler.host : kLoopback, ":", port);
    scheduler_port_ = port;
    phase_ = Phase::kRunning;
    deadline_.reset();
    for (int i = 0; i < o_.num_shards; ++i) {
      if (!Spawn(Role::kShard, i, o_.shard_binary, ShardArgv(i))) return Abort();
    }
    for (; next_worker_ < o_.num_workers; ++next_worker_) {
      if (!Spawn(Role::kWorker, next_worker_, o_.worker_program, o_.worker_argv)) return Abort();
    }
    Say(absl::StrCat("job ", o_.job_id, ": scheduler at ", scheduler_address_, " (pid ",
                     scheduler.process->pid(), "), ", Count(o_.num_shards, "shard"), ", ",
                     Count(o_.num_workers, "worker"),
                     o_.hosts.empty() ? "" : absl::StrCat(" on ", Count(o_.hosts.size(), "host")),
                     o_.tls ? ", mutual TLS" : ", plaintext", "; workers run ",
                     absl::StrJoin(o_.worker_argv, " ")));
    if (o_.tls) {
      Say(absl::StrCat("/status and /metrics need the job's token (Authorization: Bearer): "
                       "launch --status HOST:PORT --token_file ", o_.token_file));
    }
  }

  const LaunchOptions& o_;
  SignalFd& signals_;
  const std::string scratch_dir_;
  absl::Time next_beat_ = absl::InfinitePast();  // of the remote members' heartbeat
  std::map<std::string, int> metrics_ports_;  // by member name, once known
  std::map<int, int> shard_restarts_;         // by shard rank
  std::vector<int> to_restart_;               // shard ranks that died this turn
  int scheduler_restarts_ = 0;
  bool restart_scheduler_ = false;            // it died this turn
  int worker_restarts_ = 0;
  int workers_to_start_ = 0;                  // in place of workers that died this turn
  int next_worker_ = 0;                       // the launcher's number for the next worker
  int scheduler_port_ = 0;
  bool targets_written_ = false;

  std::vector<std::unique_ptr<Member>> members_;  // the scheduler first
  std::string scheduler_address_;                 // host:port, once known
  Phase phase_ = Phase::kStarting;
  std::optional<absl::Time> deadline_;  // of the current phase
  absl::Duration ending_wait_;          // how long the job has to end on its own
  std::string ending_why_;              // why, for messages
  std::optional<int> failure_;          // the job's exit status once something failed
  int interrupted_ = 0;                 // the signal that interrupted the launcher
};

int RemoveEntry(const char* path, const struct stat*, int, FTW*) { return remove(path); }

// Makes what a TLS job lacks in its scratch folder (0700): a job CA with a certificate per role,
// and a token of 256 random bits.
absl::Status MakeCredentials(LaunchOptions& o, const std::string& scratch) {
  if (!o.tls) return absl::OkStatus();
  if (o.tls_dir.empty()) {
    o.tls_dir = absl::StrCat(scratch, "/tls");
    SpawnOptions make;
    make.path = o.make_job_certs;
    make.argv = {o.make_job_certs, o.tls_dir, "scheduler", "shard", "worker"};
    make.env = o.environment;
    absl::StatusOr<CompletedProcess> made = RunToCompletion(make, absl::Seconds(60));
    if (!made.ok()) return made.status();
    if (made->wait_status != 0) {
      return absl::InternalError(absl::StrCat("making the job's TLS certificates with ",
                                              o.make_job_certs, " failed: ", made->output));
    }
  }
  if (o.token_file.empty()) {
    std::random_device random;
    std::string token;
    for (int i = 0; i < 8; ++i) absl::StrAppendFormat(&token, "%08x", random());
    o.token_file = absl::StrCat(scratch, "/token");
    if (absl::Status s = WriteFileAtomically(o.token_file, token + "\n"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

int RunJob(const LaunchOptions& options) {
  auto say = [&options](absl::string_view message) {
    WriteAll(options.output_fd, absl::StrCat("launch: ", message, "\n"));
  };
  absl::StatusOr<std::unique_ptr<SignalFd>> signals = SignalFd::Create({SIGINT, SIGTERM, SIGCHLD});
  if (!signals.ok()) {
    say(signals.status().message());
    return 1;
  }
  std::string scratch = absl::StrCat(options.temp_root, "/cohort-launch-XXXXXX");
  if (mkdtemp(scratch.data()) == nullptr) {
    say(absl::StrCat("cannot create a scratch folder in ", options.temp_root, ": ", strerror(errno),
                     " (set TMPDIR to a writable folder)"));
    return 1;
  }
  LaunchOptions job_options = options;
  int status = 1;
  if (absl::Status s = MakeCredentials(job_options, scratch); !s.ok()) {
    say(absl::StrCat("cannot make the job's credentials: ", s.message()));
  } else {
    Job job(job_options, **signals, scratch);
    status = job.Run();
  }  // every child has been reaped
  nftw(scratch.c_str(), RemoveEntry, 8, FTW_DEPTH | FTW_PHYS);
  return status;
}

std::string NewJobId() {
  std::random_device random;
  return absl::StrFormat("job-%d-%08x", getpid(), random());
}

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace cohort::launch
