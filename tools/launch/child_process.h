#ifndef COHORT_TOOLS_LAUNCH_CHILD_PROCESS_H_
#define COHORT_TOOLS_LAUNCH_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace cohort::launch {

struct SpawnOptions {
  std::string path;               // the program; run as given (no PATH search)
  std::vector<std::string> argv;  // argv[0] first
  std::vector<std::string> env;   // the child's whole environment, "NAME=value"
  std::string working_dir;        // empty: the launcher's own
  // stdin: a pipe whose non-blocking write end the launcher holds (stdin_fd()), or /dev/null.
  bool stdin_pipe = false;
};

// A process of a job as the launcher's event loop (Job) sees it: its output pipes, its stdin,
// its end and its process group. ChildProcess is the real one; tests give Job fakes.
class Process {
 public:
  enum class Stream { kStdout = 0, kStderr = 1 };

  virtual ~Process() = default;
  virtual pid_t pid() const = 0;  // also its process group id
  // The read end of a stream's pipe, or -1 once closed.
  virtual int fd(Stream s) const = 0;
  virtual void Close(Stream s) = 0;
  // The non-blocking write end of the process's stdin, or -1 once closed or without one.
  // Closing it gives the process end-of-file.
  virtual int stdin_fd() const = 0;
  virtual void CloseStdin() = 0;
  // Collects the exit status if the process has ended; returns whether it has.
  virtual bool TryReap() = 0;
  virtual bool reaped() const = 0;
  // The waitpid status; only once reaped().
  virtual int wait_status() const = 0;
  // Sends `sig` to the process group (an empty group is not an error).
  virtual void SignalGroup(int sig) const = 0;
};

// One process the launcher started, set up so that it can never outlive the launcher and can be
// stopped with everything it started in turn:
//  - it leads its own process group (a terminal's Ctrl-C reaches only the launcher, which stops
//    the job in order; signals to the group reach the child's own children too);
//  - it gets SIGKILL when the thread that spawned it ends (PR_SET_PDEATHSIG), so spawn only from
//    a thread that lives as long as the launcher (its main thread);
//  - stdin is /dev/null or a pipe the launcher writes; stdout and stderr are separate
//    non-blocking pipes the launcher reads;
//  - it starts with no blocked and no ignored signals, whatever the launcher's were.
// Not thread-safe: the spawning thread owns it. Destroying a ChildProcess that was not reaped
// kills its process group with SIGKILL and waits for it, so no error path leaves a child behind.
class ChildProcess final : public Process {
 public:
  // Starts the program and returns once it runs (execve succeeded), or the reason it could not
  // start (no such file, not executable, bad working directory) naming the program.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const SpawnOptions& options);

  ~ChildProcess() override;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const override { return pid_; }
  int fd(Stream s) const override { return fds_[static_cast<int>(s)]; }
  void Close(Stream s) override;
  // The write end of the stdin pipe (SpawnOptions::stdin_pipe).
  int stdin_fd() const override { return stdin_fd_; }
  void CloseStdin() override;
  // waitpid WNOHANG.
  bool TryReap() override;
  bool reaped() const override { return wait_status_.has_value(); }
  int wait_status() const override { return *wait_status_; }
  // Reaches whatever the child started and left in its group even after the child itself has
  // ended.
  void SignalGroup(int sig) const override;

 private:
  ChildProcess(pid_t pid, int stdin_fd, int stdout_fd, int stderr_fd);

  const pid_t pid_;
  int stdin_fd_;
  int fds_[2];
  std::optional<int> wait_status_;
};

// A program run to its end (a short check, not a job's process).
struct CompletedProcess {
  int wait_status = 0;
  std::string output;  // stdout, then stderr
};
// Spawns the program, collects its output and waits for it; after timeout its group is
// killed and DeadlineExceeded names the program.
absl::StatusOr<CompletedProcess> RunToCompletion(const SpawnOptions& options,
                                                 absl::Duration timeout);

// "exited with status 3" or "was killed by signal 9 (Killed)", for a waitpid status.
std::string DescribeWaitStatus(int wait_status);

// The status a shell would report for a waitpid status: the exit code, or 128 + the signal.
int ExitCodeOf(int wait_status);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_CHILD_PROCESS_H_
