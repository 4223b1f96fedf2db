#include "services/common/termination.h"

#include <signal.h>
#include <unistd.h>

#include <thread>

namespace cohort {

void OnTerminationSignal(std::function<void(int signo)> on_signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, on_signal = std::move(on_signal)] {
    int signo = 0;
    if (sigwait(&set, &signo) != 0) return;
    // The second signal, while the first one's answer runs, ends the process.
    std::thread([set] {
      int again = 0;
      if (sigwait(&set, &again) == 0) _exit(128 + again);
    }).detach();
    on_signal(signo);
  }).detach();
}

const char* TerminationSignalName(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

}  // namespace cohort
