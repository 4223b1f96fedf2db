#include "services/membership/leave_on_signal.h"

#include <unistd.h>

#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/termination.h"

namespace cohort {

namespace {
std::atomic<int> received_signal{0};
}  // namespace

void YieldToStopSignal(absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (received_signal.load() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (received_signal.load() == 0) return;
  for (;;) absl::SleepFor(absl::InfiniteDuration());  // the signal's answer exits
}

void LeaveOnTerminationSignal(const char* role, const std::atomic<MemberSession*>* member) {
  OnTerminationSignal([role, member](int signo) {
    received_signal = signo;
    const std::string why = absl::StrCat("stopped by ", TerminationSignalName(signo));
    if (MemberSession* session = member->load(); session != nullptr) {
      session->Leave(absl::CancelledError(why), absl::Seconds(1));
      std::cerr << role << " " << session->rank() << ": " << why << "\n";
    }
    std::cout << std::flush;
    _exit(128 + signo);
  });
}

}  // namespace cohort
