#ifndef COHORT_TOOLS_LAUNCH_LAUNCHER_H_
#define COHORT_TOOLS_LAUNCH_LAUNCHER_H_

#include "tools/launch/launch_options.h"

namespace cohort::launch {

// Runs one job to its end and returns the launcher's exit status: 0 when every process exited 0;
// the exit code of the first process that failed (128 + signal when it was killed); 1 when the
// job could not start or its processes had to be stopped after the workers finished; 130 / 143
// after SIGINT / SIGTERM.
//
// Order: the scheduler (bound to port 0, on 127.0.0.1 for a local job; it writes the port it
// got to a file, which a remote wrapper announces), then S shards, then W workers, each with the
// job in its environment (job_env.h), its own process group and SIGKILL on the launcher's death
// (child_process.h); a remote member is an ssh process whose wrapper stops the member when the
// launcher closes its stdin, dies, or its heartbeats stop (remote.h). Every line a process
// writes to stdout or stderr is copied to output_fd as `[worker 1] line` (`[host worker 1]` for
// a remote one); the launcher's own lines start with `launch: `.
// Metrics: every process serves /metrics on 127.0.0.1 at a port of its choosing and writes it to
// a file in the scratch folder (workers learn where from COHORT_METRICS_*; a program of the
// user's that does not serve metrics is simply not listed). As the ports appear, the launcher
// writes options.metrics_targets, a Prometheus file_sd list with the labels job, role and rank
// (deploy/prometheus/prometheus.yml reads it); the list is removed when the job is over.
// Ending: when a process fails, the others get linger + 3 s to end on their own (the scheduler
// tells them to stop); when every worker has exited 0, the scheduler and shards get linger + 10
// s. Then SIGTERM goes to each remaining process group (a remote member's stdin is closed
// instead) and, 2 s later (4 s with hosts), SIGKILL. SIGINT or SIGTERM to the launcher sends
// SIGTERM at once and SIGKILL 5 s later (a second one: at once). No child, nor anything left in a
// child's process group, outlives the call; the scratch folder is removed.
//
// Must be called from the program's main thread while it is its only thread: it blocks SIGINT,
// SIGTERM and SIGCHLD to read them through a signalfd, and the children die when the thread that
// forked them ends.
int RunJob(const LaunchOptions& options);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_LAUNCHER_H_
