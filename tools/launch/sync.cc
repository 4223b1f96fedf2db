#include "tools/launch/sync.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/launch/child_process.h"
#include "trainer/base/status_macros.h"

namespace cohort::launch {
namespace {

constexpr char kProgramsDir[] = ".cohort-bin";
constexpr char kRsync[] = "/usr/bin/rsync";

// The path inside working_dir of `path`, or nullopt when it lies elsewhere.
std::optional<std::string> InsideWorkingDir(const SyncPlan& plan, const std::string& path) {
  const std::string prefix = absl::StrCat(plan.working_dir, "/");
  if (!absl::StartsWith(path, prefix)) return std::nullopt;
  return path.substr(prefix.size());
}

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

std::vector<std::string> SyncedPrograms(const SyncPlan& plan) {
  std::vector<std::string> out;
  for (const std::string& p : plan.programs) {
    const std::optional<std::string> inside = InsideWorkingDir(plan, p);
    out.push_back(inside.has_value()
                      ? absl::StrCat(plan.dst_dir, "/", *inside)
                      : absl::StrCat(plan.dst_dir, "/", kProgramsDir, "/", BaseName(p)));
  }
  return out;
}

// ssh as rsync's -e takes it: one shell word list.
std::string RemoteShell(const SshOptions& ssh) {
  std::vector<std::string> quoted;
  for (const std::string& word : SshCommand(ssh)) quoted.push_back(ShellQuote(word));
  return absl::StrJoin(quoted, " ");
}

std::vector<std::vector<std::string>> SyncCommands(const SyncPlan& plan, const SshOptions& ssh,
                                                   absl::string_view host_name) {
  const std::string rsh = RemoteShell(ssh);
  // "--" before the paths: nothing after it is read as an option.
  std::vector<std::vector<std::string>> commands = {
      {kRsync, "--archive", "--exclude=/.git", "--exclude=/bazel-*", "-e", rsh, "--",
       absl::StrCat(plan.working_dir, "/"), absl::StrCat(host_name, ":", plan.dst_dir, "/")}};
  std::vector<std::string> elsewhere;
  for (const std::string& p : plan.programs) {
    if (!InsideWorkingDir(plan, p).has_value()) elsewhere.push_back(p);
  }
  if (!elsewhere.empty()) {
    std::vector<std::string> copy = {kRsync, "--copy-links", "--times", "--perms", "-e", rsh,
                                     "--"};
    copy.insert(copy.end(), elsewhere.begin(), elsewhere.end());
    copy.push_back(absl::StrCat(host_name, ":", plan.dst_dir, "/", kProgramsDir, "/"));
    commands.push_back(std::move(copy));
  }
  return commands;
}

std::vector<std::string> FileListSyncCommand(const SshOptions& ssh, absl::string_view host_name,
                                             const std::string& list_file,
                                             const std::string& root) {
  // --files-from turns --archive's recursion off: --recursive copies listed folders whole.
  return {kRsync, "--archive", "--recursive", "--mkpath", absl::StrCat("--files-from=", list_file),
          "-e", RemoteShell(ssh), "--", "/", absl::StrCat(host_name, ":", root, "/")};
}

absl::Status RunSync(std::vector<std::string> command, absl::string_view host_name,
                     absl::string_view what, const std::vector<std::string>& env) {
  SpawnOptions o;
  o.path = command[0];
  o.argv = std::move(command);
  o.env = env;
  absl::StatusOr<CompletedProcess> done = RunToCompletion(o, absl::Minutes(30));
  if (!done.ok()) {
    return absl::UnavailableError(
        absl::StrCat("copying ", what, " to ", host_name, ": ", done.status().message()));
  }
  if (done->wait_status != 0) {
    return absl::UnavailableError(absl::StrCat("copying ", what, " to ", host_name, ": rsync ",
                                               DescribeWaitStatus(done->wait_status), ": ",
                                               done->output));
  }
  return absl::OkStatus();
}

absl::Status ForEachHost(int n, const std::function<absl::Status(int)>& f) {
  std::vector<absl::Status> results(n);
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < std::min(n, kHostFanout); ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < n; i = next++) results[i] = f(i);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::Status SyncToHosts(const SyncPlan& plan, const SshOptions& ssh,
                         const std::vector<Host>& hosts, const std::vector<std::string>& env) {
  return ForEachHost(static_cast<int>(hosts.size()), [&](int h) {
    for (std::vector<std::string>& command : SyncCommands(plan, ssh, hosts[h].name)) {
      RETURN_IF_ERROR(RunSync(std::move(command), hosts[h].name, "the job's files", env));
    }
    return absl::OkStatus();
  });
}

}  // namespace cohort::launch
