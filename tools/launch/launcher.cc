#include "tools/launch/launcher.h"

#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tools/launch/checkpoint_report.h"
#include "tools/launch/child_process.h"
#include "tools/launch/credentials.h"
#include "tools/launch/job.h"
#include "tools/launch/signal_fd.h"

namespace cohort::launch {
namespace {

int RemoveEntry(const char* path, const struct stat*, int, FTW*) { return remove(path); }

}  // namespace

int RunJob(const LaunchOptions& options) {
  auto say = [&options](absl::string_view message) {
    WriteAll(options.output_fd, absl::StrCat("launch: ", message, "\n"));
  };
  absl::StatusOr<std::unique_ptr<SignalFd>> signals = SignalFd::Create({SIGINT, SIGTERM, SIGCHLD});
  if (!signals.ok()) {
    say(signals.status().message());
    return 1;
  }
  std::string scratch = absl::StrCat(options.temp_root, "/cohort-launch-XXXXXX");
  if (mkdtemp(scratch.data()) == nullptr) {
    say(absl::StrCat("cannot create a scratch folder in ", options.temp_root, ": ", strerror(errno),
                     " (set TMPDIR to a writable folder)"));
    return 1;
  }
  LaunchOptions job_options = options;
  int status = 1;
  if (absl::Status s = MakeCredentials(job_options, scratch); !s.ok()) {
    say(absl::StrCat("cannot make the job's credentials: ", s.message()));
  } else {
    status = RunJobProcesses(job_options, **signals, scratch,
                             [](const SpawnOptions& o) -> absl::StatusOr<std::unique_ptr<Process>> {
                               return ChildProcess::Spawn(o);
                             });
    // The folder is this machine's when every member runs here.
    if (options.hosts.empty() && options.checkpoints.checkpoint_every > 0) {
      say(NewestCheckpointReport(options.checkpoints.folder(), options.scheduler.num_shards,
                                 absl::Now()));
    }
  }  // every child has been reaped
  nftw(scratch.c_str(), RemoveEntry, 8, FTW_DEPTH | FTW_PHYS);
  return status;
}

}  // namespace cohort::launch
