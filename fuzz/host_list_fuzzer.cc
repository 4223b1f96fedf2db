// Hosts files and -H lists as the launcher reads them: every host accepted is one that ssh and
// rsync cannot take for an option, and every refusal is one line of printable text naming
// where it is.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tools/launch/hosts.h"
#include "tools/launch/remote.h"

namespace cohort::launch {
namespace {

// The bytes a host's name may hold, as a set independent of the parser's own rules.
bool HasOnlyHostNameBytes(absl::string_view name) {
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && !absl::StrContains(".-_@[]:", c)) return false;
  }
  return true;
}

// A name ssh dials, after "--", and rsync reaches through it.
void CheckName(absl::string_view name) {
  if (name.empty() || name.front() == '-' || !HasOnlyHostNameBytes(name)) __builtin_trap();
  const std::string target = SshTarget(name);
  if (target.empty() || target.front() == '-') __builtin_trap();
  const std::vector<std::string> argv = SshArgv(SshOptions(), name, "true");
  if (argv[argv.size() - 3] != "--" || argv[argv.size() - 2] != target) __builtin_trap();
}

// The DNS name without case, the user with it.
std::string CaselessHost(absl::string_view name) {
  const size_t at = name.find('@');
  const size_t host = at == absl::string_view::npos ? 0 : at + 1;
  return absl::StrCat(name.substr(0, host), absl::AsciiStrToLower(name.substr(host)));
}

void CheckAccepted(const std::vector<Host>& hosts) {
  if (hosts.empty()) __builtin_trap();
  absl::flat_hash_set<std::string> seen;
  for (const Host& h : hosts) {
    if (!CheckHostName(h.name).ok() || h.slots < 1 || h.slots > (1 << 16)) __builtin_trap();
    CheckName(h.name);
    if (!seen.insert(CaselessHost(h.name)).second) __builtin_trap();
    // A host reads back as itself from the list form.
    absl::StatusOr<std::vector<Host>> again = ParseHostList(absl::StrCat(h.name, ":", h.slots));
    if (!again.ok() || again->size() != 1 || (*again)[0].name != h.name ||
        (*again)[0].slots != h.slots) {
      __builtin_trap();
    }
  }
}

// One InvalidArgument line a terminal shows as it is, starting where the input went wrong.
void CheckRefusal(const absl::Status& status, absl::string_view where) {
  if (!absl::IsInvalidArgument(status) || !absl::StartsWith(status.message(), where)) {
    __builtin_trap();
  }
  for (char c : status.message()) {
    if (c < 0x20 || c > 0x7e) __builtin_trap();
  }
}

void FuzzHosts(absl::string_view text) {
  absl::StatusOr<std::vector<Host>> file = ParseHostsFile(text, "hosts");
  if (file.ok()) {
    CheckAccepted(*file);
  } else {
    CheckRefusal(file.status(), "hosts:");
  }
  absl::StatusOr<std::vector<Host>> list = ParseHostList(text);
  if (list.ok()) {
    CheckAccepted(*list);
  } else {
    CheckRefusal(list.status(), "-H");
  }
  if (CheckHostName(text).ok()) CheckName(text);
  (void)IsPlainlyHostList(text);
}

}  // namespace
}  // namespace cohort::launch

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::launch::FuzzHosts(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
