#include "services/common/addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/common/log_safe.h"

namespace cohort {

namespace {

constexpr size_t kMaxDnsName = 253;
constexpr size_t kMaxDnsLabel = 63;

std::string Quoted(absl::string_view text) { return absl::StrCat("'", LogSafe(text), "'"); }

// inet_pton of text, which must hold no NUL (a C string would end there).
bool ParsesAsAddress(int family, absl::string_view text, void* address) {
  return !absl::StrContains(text, '\0') &&
         inet_pton(family, std::string(text).c_str(), address) == 1;
}

// Why `name` is not a DNS name of RFC 1123 labels; empty when it is one.
std::string DnsNameFault(absl::string_view name) {
  if (name.size() > kMaxDnsName) return absl::StrCat("it is over ", kMaxDnsName, " characters");
  const std::vector<absl::string_view> labels = absl::StrSplit(name, '.');
  for (absl::string_view label : labels) {
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-') {
        return absl::StrCat(Quoted(absl::string_view(&c, 1)), " cannot be in one");
      }
    }
    if (label.empty()) return "it has an empty label: a '.' at an end, or two together";
    if (label.size() > kMaxDnsLabel) {
      return absl::StrCat("a label is over ", kMaxDnsLabel, " characters");
    }
    if (label.front() == '-' || label.back() == '-') return "a label starts or ends with '-'";
  }
  // Resolvers read all-numeric names as addresses ("10.1" is 10.0.0.1).
  if (std::all_of(labels.back().begin(), labels.back().end(), absl::ascii_isdigit)) {
    return "it ends in a number but is not an IPv4 address a.b.c.d";
  }
  return "";
}

}  // namespace

bool IsIpv4Address(absl::string_view text) {
  in_addr address;
  return ParsesAsAddress(AF_INET, text, &address);
}

std::optional<in6_addr> BracketedIpv6Address(absl::string_view text) {
  in6_addr address;
  if (!absl::ConsumePrefix(&text, "[") || !absl::ConsumeSuffix(&text, "]") ||
      !ParsesAsAddress(AF_INET6, text, &address)) {
    return std::nullopt;
  }
  return address;
}

std::string HostNameFault(absl::string_view host) {
  if (host.empty()) return "it is empty";
  if (host.front() == '-') return "it starts with '-', as an option does";
  if (host.front() == '[') {
    return BracketedIpv6Address(host).has_value() ? "" : "the brackets hold no IPv6 address";
  }
  return IsIpv4Address(host) ? "" : DnsNameFault(host);
}

absl::Status CheckDialAddress(absl::string_view address) {
  const absl::string_view host = HostOfAddress(address);
  std::string fault = HostNameFault(host);
  if (fault.empty() && host.size() != address.size() && PortOfAddress(address) < 0) {
    fault = "the port is not a number from 1 to 65535";
  }
  if (fault.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      Quoted(address), " is not an address to dial (", fault,
      "); give host or host:port, the host a DNS name, an IPv4 address or an [IPv6] address"));
}

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
  // A bare IPv6 address ("::1") has colons but no port, nor has "[::1]".
  if (address.find(':') != colon && !absl::StartsWith(address, "[")) return address;
  if (absl::StartsWith(address, "[") && address.rfind(']') > colon) return address;
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
