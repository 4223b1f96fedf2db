#ifndef COHORT_TOOLS_LAUNCH_SIGNAL_FD_H_
#define COHORT_TOOLS_LAUNCH_SIGNAL_FD_H_

#include <signal.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::launch {

// Delivers signals through a file descriptor (signalfd) that a poll loop watches with the child
// processes' pipes, so the launcher handles Ctrl-C and child exits in its ordinary control flow
// instead of in signal handlers. The signals are blocked in the calling thread while the object
// lives: create it in a single-threaded program (or one whose every thread blocks them), or a
// thread that does not block them would still take their default action. The destructor restores
// the previous signal mask. ChildProcess starts children with an empty mask, so they are not
// affected.
class SignalFd {
 public:
  static absl::StatusOr<std::unique_ptr<SignalFd>> Create(const std::vector<int>& signals);
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_; }

  // The signals that arrived since the last call, in order (a signal that arrived several times
  // while pending shows once). Does not block.
  std::vector<int> Read();

 private:
  SignalFd(int fd, const sigset_t& old_mask) : fd_(fd), old_mask_(old_mask) {}

  const int fd_;
  const sigset_t old_mask_;
};

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_SIGNAL_FD_H_
