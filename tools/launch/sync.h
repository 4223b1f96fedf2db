#ifndef COHORT_TOOLS_LAUNCH_SYNC_H_
#define COHORT_TOOLS_LAUNCH_SYNC_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/launch/hosts.h"
#include "tools/launch/remote.h"

namespace cohort::launch {

// What `launch --sync_dst_dir DIR` copies to every host before the job starts, with rsync over
// ssh: the working directory's contents into DIR (without .git and the bazel-* links; files
// already there and unchanged are skipped), and each program that is not inside the working
// directory (the role binaries, a program elsewhere) into DIR/.cohort-bin, links followed.
struct SyncPlan {
  std::string working_dir;            // absolute
  std::string dst_dir;                // absolute, on every host
  std::vector<std::string> programs;  // absolute paths here
};

// Where each of plan.programs is on the hosts after the sync, in order.
std::vector<std::string> SyncedPrograms(const SyncPlan& plan);

// The rsync command lines that carry out the plan on one host (`host_name` as the hosts list
// gives it, which CheckHostName accepted), in order: options, then "--", then the paths.
std::vector<std::vector<std::string>> SyncCommands(const SyncPlan& plan, const SshOptions& ssh,
                                                   absl::string_view host_name);

// Runs f(i) for i in [0, n), up to kHostFanout at once, each on a thread of its own (a copy
// waits on ssh and the network, not on this machine's CPU: one host after another, 32 hosts
// took 27 s); the failure of the lowest i, if any.
inline constexpr int kHostFanout = 32;
absl::Status ForEachHost(int n, const std::function<absl::Status(int)>& f);

// Runs the commands for every host (ForEachHost; each host's in order), with `env` as their
// environment; a failure is an error naming the host, with rsync's own words.
absl::Status SyncToHosts(const SyncPlan& plan, const SshOptions& ssh,
                         const std::vector<Host>& hosts, const std::vector<std::string>& env);

// The rsync command that copies the files `list_file` names (paths relative to "/", one a line;
// folders with what they hold) to `root` on a host, each under its own absolute path there.
std::vector<std::string> FileListSyncCommand(const SshOptions& ssh, absl::string_view host_name,
                                             const std::string& list_file,
                                             const std::string& root);

// Runs one rsync command for `host_name` (what copying is for, in the error: "the job's files").
absl::Status RunSync(std::vector<std::string> command, absl::string_view host_name,
                     absl::string_view what, const std::vector<std::string>& env);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_SYNC_H_
