#include "tools/launch/hosts.h"

#include <arpa/inet.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/common/addresses.h"
#include "services/common/log_safe.h"

namespace cohort::launch {
namespace {

constexpr int kMaxSlots = 1 << 16;
// What Windows editors put at the start of a UTF-8 file.
constexpr absl::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";

// Input as a message quotes it, escaped (LogSafe): a hostile name cannot start a new line or
// drive the reader's terminal.
std::string Quoted(absl::string_view text) { return absl::StrCat("'", LogSafe(text), "'"); }

// where: "hosts.txt:3" or "-H entry 2".
absl::Status LineError(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Why `user` (what comes before '@') is not a POSIX portable user name; empty when it is one.
std::string UserNameFault(absl::string_view user) {
  if (user.empty()) return "the user before '@' is empty";
  if (user.front() == '-') return "the user starts with '-'";
  for (char c : user) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::StrCat(Quoted(absl::string_view(&c, 1)), " cannot be in the user");
    }
  }
  return "";
}

// The user and the host of "user@host" (the user empty without '@').
std::pair<absl::string_view, absl::string_view> SplitUser(absl::string_view name) {
  const size_t at = name.find('@');
  if (at == absl::string_view::npos) return {"", name};
  return {name.substr(0, at), name.substr(at + 1)};
}

// What two entries for one host share: the user as written, the DNS name in lower case and an
// IPv6 address in its one canonical form.
std::string HostKey(absl::string_view name) {
  const auto [user, host] = SplitUser(name);
  const std::optional<in6_addr> v6 = BracketedIpv6Address(host);
  if (!v6.has_value()) return absl::StrCat(user, "@", absl::AsciiStrToLower(host));
  char text[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, &*v6, text, sizeof(text));
  return absl::StrCat(user, "@[", text, "]");
}

absl::StatusOr<int> ParseSlots(absl::string_view text, absl::string_view where) {
  int slots = 0;
  if (!absl::SimpleAtoi(text, &slots) || slots < 1 || slots > kMaxSlots) {
    return LineError(where, absl::StrCat("slots ", Quoted(text),
                                         ": expected a whole number from 1 to ", kMaxSlots));
  }
  return slots;
}

// "host" or "host:N"; an IPv6 address goes in brackets ("[fe80::1]:2"). *has_slots says
// whether the word gave the slots.
absl::StatusOr<Host> ParseHostWord(absl::string_view word, absl::string_view where,
                                   bool* has_slots) {
  *has_slots = false;
  Host host;
  absl::string_view name = word;
  const size_t bracket = word.rfind(']');
  const size_t colon = word.rfind(':');
  if (colon != absl::string_view::npos && (bracket == absl::string_view::npos || colon > bracket)) {
    name = word.substr(0, colon);
    absl::StatusOr<int> slots = ParseSlots(word.substr(colon + 1), where);
    if (!slots.ok()) return slots.status();
    host.slots = *slots;
    *has_slots = true;
  }
  if (name.empty() ||
      (name.front() == '[' ? name.back() != ']' : absl::StrContains(name, ':'))) {
    return LineError(where,
                     absl::StrCat("host ", Quoted(word), ": expected host, host:N or [IPv6]:N"));
  }
  if (absl::Status s = CheckHostName(name); !s.ok()) return LineError(where, s.message());
  host.name = std::string(name);
  return host;
}

// The hosts read so far, by HostKey, with where each was listed.
using SeenHosts = absl::flat_hash_map<std::string, std::string>;

// Appends host unless it is there already.
absl::Status AddHost(Host host, absl::string_view where, std::vector<Host>* hosts,
                     SeenHosts* seen) {
  const auto [first, added] = seen->try_emplace(HostKey(host.name), where);
  if (!added) {
    return LineError(where, absl::StrCat("host ", host.name, " is listed twice (also at ",
                                         first->second, "); give it once, with all its slots"));
  }
  hosts->push_back(std::move(host));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckHostName(absl::string_view name) {
  const auto [user, host] = SplitUser(name);
  std::string fault = absl::StrContains(name, '@') ? UserNameFault(user) : "";
  if (fault.empty()) fault = HostNameFault(host);
  if (fault.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(name), " is not a host name (", fault,
                   "); give a DNS name, an IPv4 address or an [IPv6] address, optionally after "
                   "user@"));
}

absl::StatusOr<std::vector<Host>> ParseHostsFile(absl::string_view text,
                                                 absl::string_view source) {
  absl::ConsumePrefix(&text, kUtf8ByteOrderMark);
  std::vector<Host> hosts;
  SeenHosts seen;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    const std::vector<absl::string_view> words =
        absl::StrSplit(absl::StripAsciiWhitespace(line), absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.empty()) continue;
    const std::string where = absl::StrCat(source, ":", line_number);
    bool has_slots;
    absl::StatusOr<Host> host = ParseHostWord(words[0], where, &has_slots);
    if (!host.ok()) return host.status();
    for (size_t i = 1; i < words.size(); ++i) {
      if (!absl::StartsWith(words[i], "slots=")) {
        return LineError(
            where, absl::StrCat("unknown option ", Quoted(words[i]), " (hosts take slots=N)"));
      }
      if (has_slots) {
        return LineError(where, absl::StrCat("host ", host->name, " gives its slots twice"));
      }
      has_slots = true;
      absl::StatusOr<int> slots = ParseSlots(words[i].substr(6), where);
      if (!slots.ok()) return slots.status();
      host->slots = *slots;
    }
    if (absl::Status s = AddHost(*std::move(host), where, &hosts, &seen); !s.ok()) return s;
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no host in it"));
  }
  return hosts;
}

absl::StatusOr<std::vector<Host>> ParseHostList(absl::string_view list) {
  std::vector<Host> hosts;
  SeenHosts seen;
  int entry = 0;
  for (absl::string_view word : absl::StrSplit(list, ',')) {
    ++entry;
    word = absl::StripAsciiWhitespace(word);
    if (word.empty()) continue;
    const std::string where = absl::StrCat("-H entry ", entry);
    bool has_slots;
    absl::StatusOr<Host> host = ParseHostWord(word, where, &has_slots);
    if (!host.ok()) return host.status();
    if (absl::Status s = AddHost(*std::move(host), where, &hosts, &seen); !s.ok()) return s;
  }
  if (hosts.empty()) return absl::InvalidArgumentError("-H: no host in it");
  return hosts;
}

bool IsPlainlyHostList(absl::string_view arg) {
  if (absl::StrContains(arg, '/')) return false;
  return arg.find_first_of(",:@") != absl::string_view::npos || IsIpv4Address(arg);
}

absl::StatusOr<Placement> PlaceJob(const std::vector<Host>& hosts, int num_workers,
                                   int num_shards, const PlacementChoice& choice) {
  auto index_of = [&hosts](absl::string_view name, absl::string_view flag) -> absl::StatusOr<int> {
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (hosts[i].name == name) return static_cast<int>(i);
    }
    std::vector<std::string> names;
    for (const Host& h : hosts) names.push_back(h.name);
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", name, "' is not one of the hosts (",
                                                   absl::StrJoin(names, ", "), ")"));
  };
  Placement p;
  if (!choice.scheduler_host.empty()) {
    absl::StatusOr<int> i = index_of(choice.scheduler_host, "--scheduler_host");
    if (!i.ok()) return i.status();
    p.scheduler = *i;
  }
  std::vector<int> shard_hosts;
  for (const std::string& name : choice.shard_hosts) {
    absl::StatusOr<int> i = index_of(name, "--shard_hosts");
    if (!i.ok()) return i.status();
    shard_hosts.push_back(*i);
  }
  if (shard_hosts.empty()) {
    for (int i = 0; i < static_cast<int>(hosts.size()); ++i) shard_hosts.push_back(i);
  }
  int slots = 0;
  for (const Host& h : hosts) slots += h.slots;
  if (slots < num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_workers, " workers, but the ", hosts.size(), " hosts have ", slots,
        " slots; add hosts or slots, or start fewer workers (-n)"));
  }
  const int n = static_cast<int>(hosts.size());
  for (int s = 0; s < num_shards; ++s) p.shards.push_back(shard_hosts[s % shard_hosts.size()]);
  std::vector<int> taken(n, 0);
  int next = 0;
  for (int w = 0; w < num_workers; ++w) {
    while (taken[next] == hosts[next].slots) next = (next + 1) % n;
    p.workers.push_back(next);
    ++taken[next];
    next = (next + 1) % n;
  }
  return p;
}

}  // namespace cohort::launch
