#ifndef COHORT_SERVICES_COMMON_ADDRESSES_H_
#define COHORT_SERVICES_COMMON_ADDRESSES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace cohort {

// This machine's host name ("unknown-host" if it has none).
std::string HostName();

// Whether peers on other machines could never reach `host` (localhost, 127.0.0.0/8, ::1).
bool IsLoopbackAddress(absl::string_view host);

// Whether a server listening at `host` listens at every address ("", "0.0.0.0", "::", "[::]").
bool IsAnyAddress(absl::string_view host);

// Whether `host` is this machine as seen from this network namespace: a loopback address, the
// machine's name, or a numeric address one of the namespace's interfaces has. Names are not
// looked up (no DNS on the data path's way).
bool IsThisHostsAddress(absl::string_view host);

// The port of "host:port"; -1 when it has none.
int PortOfAddress(absl::string_view address);

// The host of "host:port" ("[v6]:port" keeps its brackets); the whole text when it has no port.
absl::string_view HostOfAddress(absl::string_view address);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_ADDRESSES_H_
