#include "services/common/addresses.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace cohort {

bool IsLoopbackAddress(absl::string_view host) {
  const std::string a = absl::AsciiStrToLower(host);
  return a == "localhost" || absl::StartsWith(a, "127.") || a == "::1" || a == "[::1]" ||
         absl::EndsWith(a, ".localhost");
}

absl::string_view HostOfAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return address;
  // A bare IPv6 address ("::1") has colons but no port.
  if (address.find(':') != colon && !absl::StartsWith(address, "[")) return address;
  return address.substr(0, colon);
}

}  // namespace cohort
