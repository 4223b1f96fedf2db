#include "tools/launch/remote.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace cohort::launch {
namespace {

// The wrapper (RemoteMember's contract): bash -c SCRIPT cohort-remote RUN_DIR WORKING_DIR
// WORKERS_ON_HOST SILENCE_S PROGRAM ARGS...
constexpr char kWrapper[] = R"sh(set -u
run_dir=$1 work_dir=$2 workers_on_host=$3 silence=$4
shift 4
say() { echo "cohort-remote on ${HOSTNAME:-$(uname -n)}: $*" >&2; }
pid=
stop() {
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.2
    kill -0 -- "-$pid" 2>/dev/null || return 0
  done
  kill -KILL -- "-$pid" 2>/dev/null
  return 0
}
trap 'stop; rm -rf -- "$run_dir"' EXIT
trap 'exit 143' TERM HUP INT PIPE
umask 077
mkdir -- "$run_dir" || { say "cannot create $run_dir"; exit 126; }
# The folder's owner: this wrapper's pid and start time (field 22 of /proc/PID/stat).
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  set -- ${stat##*) }
  echo "${20}"
}
echo "$$ $(start_time $$)" >"$run_dir/.owner"
# Folders of wrappers killed outright (all of a host's processes killed, a crash) go with the
# next member started here: this user's, whose owner is no longer running.
for d in "${run_dir%/*}"/cohort-*; do
  [ -O "$d/.owner" ] && read -r owner started <"$d/.owner" || continue
  [ "$(start_time "$owner")" = "$started" ] || rm -rf -- "$d"
done
while IFS= read -r name && [ "$name" != . ]; do
  IFS= read -r data && printf '%s' "$data" | base64 -d >"$run_dir/$name" ||
    { say "cannot write $run_dir/$name"; exit 126; }
done
cd -- "$work_dir" ||
  { say "cannot change to $work_dir (make it exist there, or copy it with --sync_dst_dir)"; exit 126; }
if [ "$workers_on_host" -gt 0 ] && [ -z "${OMP_NUM_THREADS:-}" ]; then
  threads=$(( $(nproc) / workers_on_host ))
  export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 ))
fi
setsid "$@" </dev/null &
pid=$!
announced=" "
while kill -0 "$pid" 2>/dev/null; do
  for f in "$run_dir"/*.port; do
    [ -f "$f" ] || continue
    case "$announced" in *" $f "*) continue ;; esac
    announced="$announced$f "
    printf '\036port %s %s\n' "${f##*/}" "$(cat -- "$f")"
  done
  IFS= read -r -t "$silence" _ && continue
  say "the launcher closed its connection or fell silent for ${silence} s; stopping $1"
  stop
  break
done
wait "$pid"
)sh";

bool IsFileName(absl::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

}  // namespace

std::string ShellQuote(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

std::string SshTarget(absl::string_view host_name) {
  const size_t at = host_name.find('@');
  const absl::string_view user = at == absl::string_view::npos ? "" : host_name.substr(0, at + 1);
  absl::string_view host = host_name.substr(user.size());
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  return absl::StrCat(user, host);
}

std::string AddressOfHost(absl::string_view host_name) {
  const size_t at = host_name.find('@');
  return std::string(at == absl::string_view::npos ? host_name : host_name.substr(at + 1));
}

std::vector<std::string> SshCommand(const SshOptions& ssh) {
  std::vector<std::string> argv = {
      ssh.binary,
      "-T",  // no terminal: the remote process's output reaches us as plain pipes
      // Never prompt: a job must not hang waiting for a password no one types.
      "-o", "BatchMode=yes",
      // A host that stops answering ends the connection (and the member) within ~15 s.
      "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=10"};
  if (ssh.port > 0) argv.insert(argv.end(), {"-p", absl::StrCat(ssh.port)});
  if (!ssh.identity.empty()) argv.insert(argv.end(), {"-i", ssh.identity});
  argv.insert(argv.end(), ssh.extra.begin(), ssh.extra.end());
  return argv;
}

std::vector<std::string> SshArgv(const SshOptions& ssh, absl::string_view host_name,
                                 absl::string_view remote_command) {
  std::vector<std::string> argv = SshCommand(ssh);
  argv.insert(argv.end(), {"--", SshTarget(host_name), std::string(remote_command)});
  return argv;
}

std::string RemoteCommand(const RemoteMember& member) {
  std::vector<std::string> words = {"exec", "env"};
  for (const std::string& e : member.env) words.push_back(ShellQuote(e));
  words.insert(words.end(),
               {"bash", "-c", ShellQuote(kWrapper), "cohort-remote", ShellQuote(member.run_dir),
                ShellQuote(member.working_dir), absl::StrCat(member.workers_on_host),
                absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(member.silence)))});
  for (const std::string& a : member.argv) words.push_back(ShellQuote(a));
  return absl::StrJoin(words, " ");
}

absl::StatusOr<std::string> RunDirFiles(
    const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, contents] : files) {
    if (!IsFileName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "' cannot name a file of a remote member's folder"));
    }
    absl::StrAppend(&out, name, "\n", absl::Base64Escape(contents), "\n");
  }
  out.append(".\n");
  return out;
}

std::optional<PortAnnouncement> ParsePortAnnouncement(absl::string_view line) {
  const std::vector<absl::string_view> words = absl::StrSplit(line, ' ');
  PortAnnouncement a;
  if (words.size() != 3 || words[0] != "port" || !IsFileName(words[1]) ||
      !absl::SimpleAtoi(words[2], &a.port) || a.port <= 0 || a.port > 65535) {
    return std::nullopt;
  }
  a.file = std::string(words[1]);
  return a;
}

}  // namespace cohort::launch
