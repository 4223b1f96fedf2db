#ifndef COHORT_TOOLS_LAUNCH_REMOTE_H_
#define COHORT_TOOLS_LAUNCH_REMOTE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace cohort::launch {

// How the launcher reaches other hosts (launch --launcher ssh).
struct SshOptions {
  std::string binary = "/usr/bin/ssh";
  int port = 0;                    // 0: ssh's own default (22, or ~/.ssh/config)
  std::string identity;            // -i FILE; empty: ssh's own default
  std::vector<std::string> extra;  // further ssh arguments, as the user gave them
};

// `text` as one word for a POSIX shell ('...' with embedded quotes escaped).
std::string ShellQuote(absl::string_view text);

// What ssh dials for a hosts-file entry: "user@host" stays, "[v6]" loses its brackets.
std::string SshTarget(absl::string_view host_name);
// What peers dial for a hosts-file entry, as the host of a "host:port": no "user@".
std::string AddressOfHost(absl::string_view host_name);

// ssh and its options (no host): what SshArgv starts with, and rsync's -e.
std::vector<std::string> SshCommand(const SshOptions& ssh);

// The ssh command line that runs `remote_command` (one shell command line) on `host_name`, with
// no terminal and no password prompt, and that ends by itself when the host stops answering.
std::vector<std::string> SshArgv(const SshOptions& ssh, absl::string_view host_name,
                                 absl::string_view remote_command);

// One process of a job on another host, run there by a small bash wrapper (RemoteCommand) that
//  - makes run_dir (mode 0700; it must not exist) and writes into it the files the launcher
//    sends first on stdin (RunDirFiles: the TLS certificate, key and job token, which never
//    appear on a command line), then removes it when the process ends;
//  - starts the program in working_dir, in a session of its own, with `env` set and, for a
//    worker, OMP_NUM_THREADS = max(1, the host's cores / workers_on_host) unless env sets it;
//  - announces each port file the program writes in run_dir (*.port) as a control line
//    "\x1eport NAME PORT" on stdout (ParsePortAnnouncement), for the launcher;
//  - reads the launcher's heartbeat lines on stdin; at end-of-file (the launcher stopped the
//    job, died, or its ssh connection dropped) or after `silence` without one, it sends the
//    program's process group SIGTERM and, 2 s later, SIGKILL;
//  - exits with the program's exit status (128 + signal when it was killed).
struct RemoteMember {
  std::string run_dir;                // absolute
  std::string working_dir;            // absolute
  int workers_on_host = 0;            // > 0 for a worker: how many share the host's cores
  absl::Duration silence = absl::Seconds(5);
  std::vector<std::string> env;   // "NAME=value"
  std::vector<std::string> argv;  // the program first
};

// How often the launcher writes a heartbeat line ("\n") to each remote member's stdin.
inline constexpr absl::Duration kRemoteHeartbeat = absl::Seconds(1);

// The shell command line that runs `member` through the wrapper (what ssh passes to the
// host's login shell; /bin/sh -c runs it the same way).
std::string RemoteCommand(const RemoteMember& member);

// The first bytes a remote member's stdin gets: each (name, contents) as a file for run_dir.
// Names are letters, digits, '.', '_' and '-' (and not "." or ".."); InvalidArgument otherwise.
absl::StatusOr<std::string> RunDirFiles(
    const std::vector<std::pair<std::string, std::string>>& files);

// A port the wrapper announced: the port file's name in run_dir ("scheduler.port") and the port.
struct PortAnnouncement {
  std::string file;
  int port = 0;
};
// Parses a control line's text ("port scheduler.port 9000"); nullopt for anything else.
std::optional<PortAnnouncement> ParsePortAnnouncement(absl::string_view line);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_REMOTE_H_
