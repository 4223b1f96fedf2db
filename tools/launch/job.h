#ifndef COHORT_TOOLS_LAUNCH_JOB_H_
#define COHORT_TOOLS_LAUNCH_JOB_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/launch/child_process.h"
#include "tools/launch/launch_options.h"
#include "tools/launch/signal_fd.h"

namespace cohort::launch {

// How a member's process starts: ChildProcess::Spawn, or a fake in tests.
using Spawner = std::function<absl::StatusOr<std::unique_ptr<Process>>(const SpawnOptions&)>;

// The launcher's event loop over one job (RunJob's, launcher.h): starts the scheduler with
// `spawn`, the shards and workers once the scheduler wrote its port file into scratch_dir,
// copies every line they write to options.output_fd with its member's prefix, keeps the
// metrics targets, reads `signals` (SIGINT, SIGTERM, SIGCHLD), reaps the members and tells the
// Supervisor, which decides what ends, stops or starts again; returns once every member was
// reaped, with the launcher's exit status. The credentials are made already.
int RunJobProcesses(const LaunchOptions& options, SignalFd& signals,
                    const std::string& scratch_dir, Spawner spawn);

// Writes all of `text`, whatever the descriptor takes at a time. Errors are dropped: a closed
// stdout must not stop the launcher from supervising its children.
void WriteAll(int fd, absl::string_view text);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_JOB_H_
