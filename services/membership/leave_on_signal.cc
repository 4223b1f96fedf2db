#include "services/membership/leave_on_signal.h"

#include <unistd.h>

#include <atomic>
#include <iostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "services/common/termination.h"

namespace cohort {

namespace {

std::atomic<int> received_signal{0};

// The session a stop signal makes leave; the answer holds the lock while it uses it, so that
// the session's owner cannot end it meanwhile.
ABSL_CONST_INIT absl::Mutex session_mu(absl::kConstInit);
MemberSession* session_to_leave ABSL_GUARDED_BY(session_mu) = nullptr;

}  // namespace

LeavingOnSignal::LeavingOnSignal(MemberSession* session) {
  absl::MutexLock lock(&session_mu);
  session_to_leave = session;
}

LeavingOnSignal::~LeavingOnSignal() {
  absl::MutexLock lock(&session_mu);
  session_to_leave = nullptr;
}

void YieldToStopSignal(absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (received_signal.load() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (received_signal.load() == 0) return;
  for (;;) absl::SleepFor(absl::InfiniteDuration());  // the signal's answer exits
}

void LeaveOnTerminationSignal(const char* role) {
  OnTerminationSignal([role](int signo) {
    received_signal = signo;
    const std::string why = absl::StrCat("stopped by ", TerminationSignalName(signo));
    // Held until the process exits: the session stays as long as the answer needs it.
    session_mu.Lock();
    if (MemberSession* session = session_to_leave; session != nullptr) {
      session->Leave(absl::CancelledError(why), absl::Seconds(1));
      std::cerr << role << " " << session->rank() << ": " << why << "\n";
    }
    std::cout << std::flush;
    _exit(128 + signo);
  });
}

}  // namespace cohort
