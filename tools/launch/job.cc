#include "tools/launch/job.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/durable_file.h"
#include "services/common/port_file.h"
#include "services/scheduler/job_journal.h"
#include "tools/launch/child_process.h"
#include "tools/launch/credentials.h"
#include "tools/launch/line_prefixer.h"
#include "tools/launch/member_commands.h"
#include "tools/launch/metrics_targets.h"
#include "tools/launch/remote.h"
#include "tools/launch/restart_policy.h"
#include "tools/launch/signal_fd.h"
#include "tools/launch/supervisor.h"

namespace cohort::launch {
namespace {

// Once every child has ended, how long to wait for the rest of their output.
constexpr absl::Duration kOutputDrain = absl::Seconds(1);
// The longest poll, so a missed wake-up costs little; and how often to look for the port file.
constexpr absl::Duration kMaxPoll = absl::Milliseconds(250);
constexpr absl::Duration kPortFilePoll = absl::Milliseconds(20);
// Reads per stream per loop turn, so one chatty child cannot starve the others.
constexpr int kMaxReadsPerTurn = 16;

// "[worker 1] " or, on another host, "[node2 worker 1] ".
std::string PrefixOf(absl::string_view name, absl::string_view host) {
  return absl::StrCat("[", host, host.empty() ? "" : " ", name, "] ");
}

// One process of the job.
struct Member {
  Member(Role role, int rank, std::string host, std::unique_ptr<Process> process)
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
  const std::unique_ptr<Process> process;
  LinePrefixer prefixers[2];  // by Process::Stream
  std::map<std::string, int> ports;  // the port files a remote wrapper announced, by name
};

RestartRules RestartRulesOf(const LaunchOptions& o) {
  RestartRules rules;
  rules.restart_scheduler = o.restart_scheduler;
  rules.restart_failed_shards = o.restart_failed_shards;
  rules.shard_replicas = o.scheduler.shard_replicas;
  rules.checkpoint_dir = o.checkpoints.folder();
  if (o.restart_failed_shards) rules.max_shard_restarts = o.scheduler.max_shard_restarts;
  rules.elastic = o.scheduler.elastic();
  rules.restart_failed_workers = o.restart_failed_workers;
  rules.num_workers = o.scheduler.num_workers;
  return rules;
}

SupervisorOptions SupervisorOptionsOf(const LaunchOptions& o, const std::string& scratch_dir) {
  SupervisorOptions s;
  s.job_id = o.scheduler.job_id;
  s.num_workers = o.scheduler.num_workers;
  s.elastic = o.scheduler.elastic();
  s.linger_s = o.scheduler.linger_s;
  s.remote = !o.hosts.empty();
  s.start_timeout = o.start_timeout;
  const std::string folder = RunFolderOf(o, scratch_dir, Role::kScheduler, 0);
  s.scheduler_port_file = absl::StrCat(folder, "/", kSchedulerPortFile);
  s.job_done = [journal = absl::StrCat(folder, "/", kSchedulerJournal)] {
    const absl::StatusOr<JournalState> held = ReadJournal(journal);
    return held.ok() && held->end == JobState::kDone;
  };
  s.failure_reason = [journal = absl::StrCat(folder, "/", kSchedulerJournal)] {
    const absl::StatusOr<JournalState> held = ReadJournal(journal);
    return held.ok() && held->end == JobState::kFailed ? held->reason : std::string();
  };
  return s;
}

// The event loop: starts the members, copies their output, reaps them and tells the Supervisor,
// which decides what happens next; the members are its ProcessTable.
class Job : public ProcessTable {
 public:
  Job(const LaunchOptions& options, SignalFd& signals, std::string scratch_dir, Spawner spawn)
      : o_(options),
        signals_(signals),
        scratch_dir_(std::move(scratch_dir)),
        spawn_(std::move(spawn)),
        supervisor_(SupervisorOptionsOf(options, scratch_dir_),
                    RestartPolicy(RestartRulesOf(options)), *this,
                    [this](absl::string_view message) { Say(message); }) {}

  int Run() {
    if (!Spawn(Role::kScheduler, 0, o_.scheduler_binary, SchedulerArgv(o_, 0))) return 1;
    supervisor_.Start(absl::Now());

    while (std::any_of(members_.begin(), members_.end(),
                       [](const auto& m) { return !m->process->reaped(); })) {
      Wait();
      Beat();
      for (int sig : signals_.Read()) supervisor_.OnSignal(sig, absl::Now());
      for (size_t i = 0; i < members_.size(); ++i) {
        Member& m = *members_[i];
        ReadOutput(m);
        if (!m.process->reaped() && m.process->TryReap()) {
          ReadOutput(m);  // what it wrote before it ended comes before the news of its end
          supervisor_.OnEnd(static_cast<int>(i), absl::Now());
        }
      }
      RestartMembers();
      if (supervisor_.starting()) CheckSchedulerPort();
      CheckMetricsPorts();
      supervisor_.Tick(absl::Now());
    }
    if (targets_written_) unlink(o_.metrics_targets.c_str());
    // Whatever a child left behind in its process group goes with it.
    for (auto& m : members_) m->process->SignalGroup(SIGKILL);
    DrainOutput();
    return supervisor_.Finish();
  }

  std::vector<MemberStatus> Members() const override {
    std::vector<MemberStatus> out;
    for (const auto& m : members_) {
      out.push_back({m->role, m->rank, m->name, m->Describe(), m->remote(),
                     m->process->reaped() ? std::optional<int>(m->process->wait_status())
                                          : std::nullopt});
    }
    return out;
  }

  // A remote member's stdin ends instead: its wrapper stops it, and its last output still
  // comes back.
  void Stop(int member) override {
    const Member& m = *members_[member];
    if (m.remote()) {
      m.process->CloseStdin();
    } else {
      m.process->SignalGroup(SIGTERM);
    }
  }

  void Kill(int member) override { members_[member]->process->SignalGroup(SIGKILL); }

 private:
  void Say(absl::string_view message) {
    WriteAll(o_.output_fd, absl::StrCat("launch: ", message, "\n"));
  }

  // Starts one member, or says why it could not. argv: argv[0] and the program's own flags.
  bool Spawn(Role role, int rank, const std::string& program, std::vector<std::string> argv) {
    MemberCommand command = MemberCommandOf(o_, scratch_dir_, scheduler_address_, role, rank,
                                            program, std::move(argv));
    std::string run_dir_files;
    if (!command.host.empty()) {
      absl::StatusOr<std::string> files = ReadRunDirFiles(command.run_dir_files);
      if (!files.ok()) {
        Say(absl::StrCat("cannot start the ", RoleName(role), ": ", files.status().message()));
        return false;
      }
      run_dir_files = *std::move(files);
    }
    absl::StatusOr<std::unique_ptr<Process>> child = spawn_(command.spawn);
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
    members_.push_back(
        std::make_unique<Member>(role, rank, std::move(command.host), *std::move(child)));
    return true;
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
        const int fd = m->process->fd(static_cast<Process::Stream>(s));
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
      }
    }
    absl::Duration timeout = supervisor_.starting() ? kPortFilePoll : kMaxPoll;
    if (const std::optional<absl::Time> deadline = supervisor_.deadline(); deadline.has_value()) {
      timeout = std::max(absl::ZeroDuration(), std::min(timeout, *deadline - absl::Now()));
    }
    // EINTR needs no handling: the caller looks at everything after each wake-up anyway.
    poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(timeout)) + 1);
  }

  // Copies what a member's pipes hold now to the output, line by line; closes them at EOF.
  void ReadOutput(Member& m) {
    char buffer[16384];
    std::string lines;
    for (int s = 0; s < 2; ++s) {
      const auto stream = static_cast<Process::Stream>(s);
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
        return m->process->fd(Process::Stream::kStdout) >= 0 ||
               m->process->fd(Process::Stream::kStderr) >= 0;
      });
    };
    while (open() && absl::Now() < until) {
      std::vector<pollfd> fds;
      for (const auto& m : members_) {
        for (int s = 0; s < 2; ++s) {
          const int fd = m->process->fd(static_cast<Process::Stream>(s));
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
        m->process->Close(static_cast<Process::Stream>(s));
      }
    }
    WriteAll(o_.output_fd, lines);
  }

  // Starts again the members the supervisor chose: the scheduler at its port (the members
  // register with it again), shards from the checkpoint (the scheduler waits for them), new
  // workers (the scheduler gives a joining worker its rank; the launcher numbers it for its
  // output).
  void RestartMembers() {
    const Restarts restarts = supervisor_.TakeRestarts();
    if (restarts.scheduler) {
      ForgetMetricsPort(Role::kScheduler, 0);
      if (!Spawn(Role::kScheduler, 0, o_.scheduler_binary, SchedulerArgv(o_, scheduler_port_))) {
        return supervisor_.Abort(absl::Now());
      }
    }
    for (int rank : restarts.shards) {
      ForgetMetricsPort(Role::kShard, rank);
      if (!Spawn(Role::kShard, rank, o_.shard_binary,
                 ShardArgv(o_, scheduler_address_, rank,
                           /*resume=*/o_.scheduler.shard_replicas < 2))) {
        return supervisor_.Abort(absl::Now());
      }
    }
    for (const Restarts::NewWorker& worker : restarts.workers) {
      if (!o_.hosts.empty()) {  // on the dead one's host
        o_.placement.workers.resize(worker.number + 1, o_.placement.workers[worker.replaces]);
      }
      if (!Spawn(Role::kWorker, worker.number, o_.worker_program, o_.worker_argv)) {
        return supervisor_.Abort(absl::Now());
      }
    }
  }

  // A restarted member writes its new port: the old one is no target any more.
  void ForgetMetricsPort(Role role, int rank) {
    const std::string file = absl::StrCat(RunFolderOf(o_, scratch_dir_, role, rank), "/",
                                          MetricsPortFileName(role, rank));
    unlink(file.c_str());
    metrics_ports_.erase(role == Role::kScheduler ? std::string("scheduler")
                                                  : absl::StrCat(RoleName(role), " ", rank));
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
      supervisor_.Abort(absl::Now());
      return;
    }
    if (!port->has_value()) return;  // not yet: it is written once the scheduler listens
    StartMembers(**port);
  }

  // Adds the metrics ports that appeared to the file_sd list and rewrites it.
  void CheckMetricsPorts() {
    // Every live member's port known: nothing to add. (A member that ended keeps its port
    // here, so the ports known are not compared with the members alive.)
    const bool all_known = std::all_of(members_.begin(), members_.end(), [&](const auto& m) {
      return m->process->reaped() || metrics_ports_.count(m->name) > 0;
    });
    if (o_.metrics_targets.empty() || all_known) return;
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
                         o_.scheduler.job_id, m->role, m->rank});
    }
    if (absl::Status s = WriteFileAtomically(o_.metrics_targets, FileSdTargets(targets));
        !s.ok()) {
      Say(absl::StrCat("cannot write the metrics targets: ", s.message()));
      return;
    }
    if (!targets_written_) {
      Say(absl::StrCat("Prometheus targets of the job in ", o_.metrics_targets));
    }
    targets_written_ = true;
  }

  void StartMembers(int port) {
    const Member& scheduler = *members_.front();
    // With hosts, the address the hosts list gives the scheduler's host (launch_config checks
    // that it is no loopback address when the job spans hosts).
    scheduler_address_ = absl::StrCat(scheduler.remote() ? scheduler.host : kLoopback, ":", port);
    scheduler_port_ = port;
    supervisor_.Run(scheduler_address_);
    for (int i = 0; i < o_.scheduler.num_shards; ++i) {
      if (!Spawn(Role::kShard, i, o_.shard_binary, ShardArgv(o_, scheduler_address_, i, false))) {
        return supervisor_.Abort(absl::Now());
      }
    }
    for (int i = 0; i < o_.scheduler.num_workers; ++i) {
      if (!Spawn(Role::kWorker, i, o_.worker_program, o_.worker_argv)) {
        return supervisor_.Abort(absl::Now());
      }
    }
    Say(absl::StrCat("job ", o_.scheduler.job_id, ": scheduler at ", scheduler_address_, " (pid ",
                     scheduler.process->pid(), "), ", Count(o_.scheduler.num_shards, "shard"), ", ",
                     Count(o_.scheduler.num_workers, "worker"),
                     o_.hosts.empty() ? "" : absl::StrCat(" on ", Count(o_.hosts.size(), "host")),
                     o_.tls ? ", mutual TLS" : ", plaintext", "; workers run ",
                     absl::StrJoin(o_.worker_argv, " ")));
    if (o_.tls) {
      Say(absl::StrCat("/status and /metrics need the job's token (Authorization: Bearer): "
                       "launch --status HOST:PORT --token_file ", o_.token_file));
    }
  }

  LaunchOptions o_;  // a new worker's host joins its placement
  SignalFd& signals_;
  const std::string scratch_dir_;
  const Spawner spawn_;
  Supervisor supervisor_;
  absl::Time next_beat_ = absl::InfinitePast();  // of the remote members' heartbeat
  std::map<std::string, int> metrics_ports_;      // by member name, once known
  int scheduler_port_ = 0;
  bool targets_written_ = false;
  std::vector<std::unique_ptr<Member>> members_;  // the scheduler first
  std::string scheduler_address_;                 // host:port, once known
};

}  // namespace

void WriteAll(int fd, absl::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

int RunJobProcesses(const LaunchOptions& options, SignalFd& signals,
                    const std::string& scratch_dir, Spawner spawn) {
  Job job(options, signals, scratch_dir, std::move(spawn));
  return job.Run();
}

}  // namespace cohort::launch
