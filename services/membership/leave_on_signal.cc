#include "services/membership/leave_on_signal.h"

#include <unistd.h>

#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/common/termination.h"

namespace cohort {

void LeaveOnTerminationSignal(const char* role, const std::atomic<MemberSession*>* member) {
  OnTerminationSignal([role, member](int signo) {
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
