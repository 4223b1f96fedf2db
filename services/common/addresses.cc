#include "services/common/addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace cohort {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

bool IsAnyAddress(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

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

bool IsThisHostsAddress(absl::string_view host) {
  if (IsLoopbackAddress(host)) return true;
  if (absl::AsciiStrToLower(host) == absl::AsciiStrToLower(HostName())) return true;
  std::string text(host);
  if (absl::StartsWith(text, "[") && absl::EndsWith(text, "]")) {
    text = text.substr(1, text.size() - 2);
  }
  in_addr v4;
  in6_addr v6;
  const bool is_v4 = inet_pton(AF_INET, text.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, text.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return false;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return false;
  bool found = false;
  for (const ifaddrs* i = interfaces; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (is_v4 && i->ifa_addr->sa_family == AF_INET) {
      found = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == v4.s_addr;
    } else if (is_v6 && i->ifa_addr->sa_family == AF_INET6) {
      found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, &v6,
                          sizeof v6) == 0;
    }
  }
  freeifaddrs(interfaces);
  return found;
}

int PortOfAddress(absl::string_view address) {
  const absl::string_view host = HostOfAddress(address);
  if (host.size() == address.size()) return -1;
  int port = -1;
  if (!absl::SimpleAtoi(address.substr(host.size() + 1), &port) || port <= 0 || port > 65535) {
    return -1;
  }
  return port;
}

}  // namespace cohort
