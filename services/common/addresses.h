#ifndef COHORT_SERVICES_COMMON_ADDRESSES_H_
#define COHORT_SERVICES_COMMON_ADDRESSES_H_

#include <netinet/in.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
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

// Why `host` cannot name a machine to dial, or empty when it can: a DNS name (RFC 1123 labels
// of letters, digits and inner hyphens, 1-63 characters each, 253 in all, no trailing dot, not
// all-numeric at the end), an IPv4 address a.b.c.d, or an IPv6 address in brackets
// ([fe80::1]). A name starting with '-' is none, so it cannot pass for a program's option.
// Characters it quotes are escaped (LogSafe).
std::string HostNameFault(absl::string_view host);

// Whether text is an IPv4 address a.b.c.d.
bool IsIpv4Address(absl::string_view text);

// "[v6]": the address inside the brackets, or nullopt when text is not one.
std::optional<in6_addr> BracketedIpv6Address(absl::string_view text);

// An address peers are told to dial, "host" or "host:port" (the host as HostNameFault takes
// it; the port 1-65535). InvalidArgument saying why, the text escaped.
absl::Status CheckDialAddress(absl::string_view address);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_ADDRESSES_H_
