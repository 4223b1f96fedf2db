#include "tools/launch/signal_fd.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cohort::launch {

absl::StatusOr<std::unique_ptr<SignalFd>> SignalFd::Create(const std::vector<int>& signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  sigset_t old_mask;
  if (const int error = pthread_sigmask(SIG_BLOCK, &set, &old_mask); error != 0) {
    return absl::InternalError(absl::StrCat("cannot block signals: ", strerror(error)));
  }
  const int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return absl::InternalError(absl::StrCat("cannot create a signalfd: ", strerror(error)));
  }
  return std::unique_ptr<SignalFd>(new SignalFd(fd, old_mask));
}

SignalFd::~SignalFd() {
  close(fd_);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalFd::Read() {
  std::vector<int> out;
  signalfd_siginfo info;
  while (true) {
    const ssize_t n = read(fd_, &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) {
      out.push_back(static_cast<int>(info.ssi_signo));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return out;  // EAGAIN: nothing more pending
    }
  }
}

}  // namespace cohort::launch
