#include "tools/launch/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace cohort::launch {
namespace {

// What the child reports through the close-on-exec pipe when it cannot start the program.
struct SpawnFailure {
  enum Step : int { kSetup, kChdir, kExec } step;
  int error;  // errno
};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Runs in the forked child, so it calls only async-signal-safe functions; never returns.
[[noreturn]] void RunChild(pid_t parent, int in_r, int out_w, int err_w, int report_w,
                           const char* path, char* const* argv, char* const* envp,
                           const char* working_dir) {
  auto fail = [report_w](SpawnFailure::Step step) {
    const SpawnFailure failure{step, errno};
    (void)!write(report_w, &failure, sizeof(failure));
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail(SpawnFailure::kSetup);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(SpawnFailure::kSetup);
  // The launcher may have died before prctl took effect: then nobody would ever kill us.
  if (getppid() != parent) _exit(127);

  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the launcher blocks signals it reads via signalfd
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // ignores survive exec
  }

  const int targets[3] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  const int sources[3] = {in_r, out_w, err_w};
  for (int i = 0; i < 3; ++i) {
    // dup2 clears close-on-exec, except when the descriptor already has the target number.
    const int ok =
        sources[i] == targets[i] ? fcntl(targets[i], F_SETFD, 0) : dup2(sources[i], targets[i]);
    if (ok < 0) fail(SpawnFailure::kSetup);
  }
  if (working_dir[0] != '\0' && chdir(working_dir) != 0) fail(SpawnFailure::kChdir);
  execve(path, argv, envp);
  fail(SpawnFailure::kExec);
  _exit(127);  // not reached: fail() exits
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no argv to run ", options.path));
  }
  // Everything the child needs is prepared before fork: between fork and exec it may only make
  // async-signal-safe calls.
  std::vector<char*> argv = CStrings(options.argv);
  std::vector<char*> envp = CStrings(options.env);
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int report[2] = {-1, -1};
  int in[2] = {-1, -1};  // [0]: the child's stdin; [1]: ours to write, with a pipe
  auto close_all = [&] {
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &report[0], &report[1], &in[0], &in[1]}) {
      CloseFd(*fd);
    }
  };
  const bool in_ok = options.stdin_pipe ? pipe2(in, O_CLOEXEC) == 0
                                        : (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;
  if (!in_ok || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      pipe2(report, O_CLOEXEC) != 0) {
    const int error = errno;
    close_all();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot create pipes to run ", options.path, ": ", strerror(error)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close_all();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot fork to run ", options.path, ": ", strerror(error)));
  }
  if (pid == 0) {
    RunChild(parent, in[0], out[1], err[1], report[1], options.path.c_str(), argv.data(),
             envp.data(), options.working_dir.c_str());
  }
  CloseFd(out[1]);
  CloseFd(err[1]);
  CloseFd(report[1]);
  CloseFd(in[0]);
  // The report pipe closes on a successful exec, or carries why the child could not get there.
  SpawnFailure failure;
  ssize_t n;
  do {
    n = read(report[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  CloseFd(report[0]);
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess(pid, in[1], out[0], err[0]));
  if (n == 0) {
    for (int fd : {child->stdin_fd_, child->fds_[0], child->fds_[1]}) {
      if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    return child;
  }
  if (n != static_cast<ssize_t>(sizeof(failure))) {
    return absl::InternalError(
        absl::StrCat("cannot run ", options.path, ": the child ended before it could report"));
  }
  // The child has exited (or will at once); the destructor reaps it.
  const std::string why = strerror(failure.error);
  switch (failure.step) {
    case SpawnFailure::kChdir:
      return absl::NotFoundError(absl::StrCat("cannot change to directory ", options.working_dir,
                                              " to run ", options.path, ": ", why));
    case SpawnFailure::kExec:
      if (failure.error == ENOENT) {
        return absl::NotFoundError(absl::StrCat("cannot run ", options.path, ": ", why));
      }
      if (failure.error == EACCES) {
        return absl::PermissionDeniedError(
            absl::StrCat("cannot run ", options.path, ": ", why, " (is it an executable file?)"));
      }
      return absl::FailedPreconditionError(absl::StrCat("cannot run ", options.path, ": ", why));
    case SpawnFailure::kSetup:
      break;
  }
  return absl::InternalError(
      absl::StrCat("cannot set up the process for ", options.path, ": ", why));
}

ChildProcess::ChildProcess(pid_t pid, int stdin_fd, int stdout_fd, int stderr_fd)
    : pid_(pid), stdin_fd_(stdin_fd), fds_{stdout_fd, stderr_fd} {}

ChildProcess::~ChildProcess() {
  CloseStdin();
  Close(Stream::kStdout);
  Close(Stream::kStderr);
  if (reaped()) return;
  SignalGroup(SIGKILL);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void ChildProcess::Close(Stream s) { CloseFd(fds_[static_cast<int>(s)]); }

void ChildProcess::CloseStdin() { CloseFd(stdin_fd_); }

bool ChildProcess::TryReap() {
  if (reaped()) return true;
  int status;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) wait_status_ = status;
  return reaped();
}

void ChildProcess::SignalGroup(int sig) const { kill(-pid_, sig); }

absl::StatusOr<CompletedProcess> RunToCompletion(const SpawnOptions& options,
                                                 absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(options);
  if (!child.ok()) return child.status();
  ChildProcess& p = **child;
  const absl::Time deadline = absl::Now() + timeout;
  std::string out[2];
  const ChildProcess::Stream streams[2] = {ChildProcess::Stream::kStdout,
                                           ChildProcess::Stream::kStderr};
  while (p.fd(streams[0]) >= 0 || p.fd(streams[1]) >= 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          options.path, " did not finish within ", absl::FormatDuration(timeout)));
    }
    pollfd fds[2];
    for (int i = 0; i < 2; ++i) fds[i] = {p.fd(streams[i]), POLLIN, 0};
    if (poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) < 0 &&
        errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll: ", strerror(errno)));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        out[i].append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        p.Close(streams[i]);
      }
    }
  }
  while (!p.TryReap()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          options.path, " did not exit within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return CompletedProcess{p.wait_status(), out[0] + out[1]};
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
}

int ExitCodeOf(int wait_status) {
  return WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
}

}  // namespace cohort::launch
