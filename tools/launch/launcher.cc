#include "tools/launch/launcher.h"

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

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
#include "tools/launch/signal_fd.h"

namespace cohort::launch {
namespace {

// How long the others may take to end on their own after a process failed (+ linger), and after
// every worker finished (+ linger).
constexpr absl::Duration kEndAfterFailure = absl::Seconds(3);
constexpr absl::Duration kEndAfterWorkers = absl::Seconds(10);
// From SIGTERM to SIGKILL, when the launcher stops the job and when the user interrupts it.
constexpr absl::Duration kTermGrace = absl::Seconds(2);
constexpr absl::Duration kInterruptGrace = absl::Seconds(5);
// Once every child has ended, how long to wait for the rest of their output.
constexpr absl::Duration kOutputDrain = absl::Seconds(1);
// The longest poll, so a missed wake-up costs little; and how often to look for the port file.
constexpr absl::Duration kMaxPoll = absl::Milliseconds(250);
constexpr absl::Duration kPortFilePoll = absl::Milliseconds(20);
// Reads per stream per loop turn, so one chatty child cannot starve the others.
constexpr int kMaxReadsPerTurn = 16;

constexpr char kLoopback[] = "127.0.0.1";

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

// One process of the job.
struct Member {
  Member(Role role, int rank, std::unique_ptr<ChildProcess> process)
      : role(role),
        rank(rank),
        name(role == Role::kScheduler ? "scheduler" : absl::StrCat(RoleName(role), " ", rank)),
        process(std::move(process)),
        prefixers{LinePrefixer(absl::StrCat("[", name, "] ")),
                  LinePrefixer(absl::StrCat("[", name, "] "))} {}

  std::string Describe() const { return absl::StrCat(name, " (pid ", process->pid(), ")"); }

  const Role role;
  const int rank;
  const std::string name;  // "scheduler", "shard 0", "worker 1"
  const std::unique_ptr<ChildProcess> process;
  LinePrefixer prefixers[2];  // by ChildProcess::Stream
};

class Job {
 public:
  Job(const LaunchOptions& options, SignalFd& signals, std::string scratch_dir)
      : o_(options),
        signals_(signals),
        scratch_dir_(std::move(scratch_dir)),
        port_file_(absl::StrCat(scratch_dir_, "/scheduler.port")) {}

  int Run() {
    if (!Spawn(Role::kScheduler, 0, o_.scheduler_binary,
               {o_.scheduler_binary, absl::StrCat("--bind=", kLoopback), "--port=0",
                absl::StrCat("--port_file=", port_file_),
                absl::StrCat("--metrics_port_file=", MetricsPortFile(Role::kScheduler, 0)),
                absl::StrCat("--num_workers=", o_.num_workers),
                absl::StrCat("--num_shards=", o_.num_shards), absl::StrCat("--mode=", o_.mode),
                absl::StrCat("--linger=", o_.linger_s), absl::StrCat("--job_id=", o_.job_id),
                absl::StrCat("--baseline_images_per_second=", o_.baseline_images_per_second),
                "--insecure"})) {
      return 1;
    }
    deadline_ = absl::Now() + o_.start_timeout;

    while (std::any_of(members_.begin(), members_.end(),
                       [](const auto& m) { return !m->process->reaped(); })) {
      Wait();
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
      if (phase_ == Phase::kStarting) CheckPortFile();
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

  // Starts one member, or says why it could not.
  bool Spawn(Role role, int rank, const std::string& program, std::vector<std::string> argv) {
    JobEnvSpec env;
    env.job_id = o_.job_id;
    env.role = role;
    env.rank = rank;
    env.num_workers = o_.num_workers;
    env.num_shards = o_.num_shards;
    env.mode = o_.mode;
    env.scheduler_address = scheduler_address_;
    env.cores = o_.cores;
    env.metrics_bind = kLoopback;
    env.metrics_port_file = MetricsPortFile(role, rank);
    SpawnOptions spawn;
    spawn.path = program;
    spawn.argv = std::move(argv);
    spawn.env = JobEnvironment(o_.environment, env);
    spawn.working_dir = o_.working_dir;
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(spawn);
    if (!child.ok()) {
      Say(absl::StrCat("cannot start the ", RoleName(role),
                       role == Role::kScheduler ? "" : absl::StrCat(" of rank ", rank), ": ",
                       child.status().message()));
      return false;
    }
    members_.push_back(std::make_unique<Member>(role, rank, *std::move(child)));
    return true;
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
          m.prefixers[s].Feed(absl::string_view(buffer, static_cast<size_t>(n)), &lines);
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
    if (status != 0) {
      Say(absl::StrCat(m.Describe(), " ", DescribeWaitStatus(status),
                       phase_ == Phase::kStarting ? " before it wrote its port file" : ""));
      Fail(ExitCodeOf(status), absl::StrCat(m.name, " failed"));
      return;
    }
    if (m.role == Role::kScheduler && phase_ == Phase::kStarting) {
      Say(absl::StrCat(m.Describe(), " exited before it wrote its port file ", port_file_));
      Fail(1, "the scheduler ended");
    } else if (m.role == Role::kScheduler) {
      EndWithin(kEndAfterWorkers, "the scheduler ended");
    } else if (m.role == Role::kWorker && AllWorkersSucceeded()) {
      EndWithin(kEndAfterWorkers, "every worker finished");
    }
  }

  bool AllWorkersSucceeded() const {
    int done = 0;
    for (const auto& m : members_) {
      if (m->role == Role::kWorker && m->process->reaped() && m->process->wait_status() == 0) {
        ++done;
      }
    }
    return done == o_.num_workers;
  }

  // Records the job's status (the first failure's) and lets the others end on their own.
  void Fail(int exit_code, std::string why) {
    if (!failure_.has_value()) failure_ = exit_code;
    EndWithin(kEndAfterFailure, std::move(why));
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
    Terminate(kTermGrace);
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
            "the scheduler did not write its port file %s within %s; stopping the job (see the "
            "scheduler's output above)",
            port_file_, absl::FormatDuration(o_.start_timeout)));
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

  void Terminate(absl::Duration grace) {
    for (const Member* m : Running()) m->process->SignalGroup(SIGTERM);
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

  std::string MetricsPortFile(Role role, int rank) const {
    return absl::StrCat(scratch_dir_, "/", RoleName(role), "-", rank, ".metrics_port");
  }

  // Once the scheduler has written its port: starts the shards, then the workers.
  void CheckPortFile() {
    absl::StatusOr<std::optional<int>> port = ReadPortFile(port_file_);
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
    if (o_.metrics_targets.empty() || metrics_ports_.size() == members_.size()) return;
    bool found = false;
    for (const auto& m : members_) {
      if (metrics_ports_.count(m->name) > 0) continue;
      absl::StatusOr<std::optional<int>> port = ReadPortFile(MetricsPortFile(m->role, m->rank));
      if (!port.ok() || !port->has_value()) continue;
      metrics_ports_[m->name] = **port;
      found = true;
    }
    if (!found) return;
    std::vector<MetricsTarget> targets;
    for (const auto& m : members_) {
      auto it = metrics_ports_.find(m->name);
      if (it == metrics_ports_.end()) continue;
      targets.push_back({absl::StrCat(kLoopback, ":", it->second), o_.job_id, m->role, m->rank});
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
    scheduler_address_ = absl::StrCat(kLoopback, ":", port);
    phase_ = Phase::kRunning;
    deadline_.reset();
    for (int i = 0; i < o_.num_shards; ++i) {
      if (!Spawn(Role::kShard, i, o_.shard_binary,
                 {o_.shard_binary, absl::StrCat("--scheduler=", scheduler_address_),
                  absl::StrCat("--bind=", kLoopback), absl::StrCat("--rank=", i),
                  absl::StrCat("--metrics_port_file=", MetricsPortFile(Role::kShard, i)),
                  "--insecure"})) {
        return Abort();
      }
    }
    for (int r = 0; r < o_.num_workers; ++r) {
      if (!Spawn(Role::kWorker, r, o_.worker_program, o_.worker_argv)) return Abort();
    }
    Say(absl::StrCat("job ", o_.job_id, ": scheduler at ", scheduler_address_, " (pid ",
                     members_.front()->process->pid(), "), ", Count(o_.num_shards, "shard"), ", ",
                     Count(o_.num_workers, "worker"), " running ",
                     absl::StrJoin(o_.worker_argv, " ")));
  }

  const LaunchOptions& o_;
  SignalFd& signals_;
  const std::string scratch_dir_;
  const std::string port_file_;
  std::map<std::string, int> metrics_ports_;  // by member name, once known
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
  int status;
  {
    Job job(options, **signals, scratch);
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
