#ifndef COHORT_SERVICES_COMMON_TERMINATION_H_
#define COHORT_SERVICES_COMMON_TERMINATION_H_

#include <functional>

namespace cohort {

// A role's answer to SIGTERM and SIGINT (a container engine's or Kubernetes' stop, Slurm's
// scancel, Ctrl-C): `on_signal(signo)` runs once, on a thread of its own, and should end the
// process promptly (engines kill it a few seconds later). A second signal ends the process at
// once with status 128 + signo.
//
// Call first thing in main, before any thread starts: both signals are blocked in the calling
// thread, so every later thread inherits the mask and only the watcher receives them. This also
// matters as a container's PID 1, which the kernel never kills on a signal without a handler.
void OnTerminationSignal(std::function<void(int signo)> on_signal);

// "SIGTERM", "SIGINT", else "a signal".
const char* TerminationSignalName(int signo);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_TERMINATION_H_
