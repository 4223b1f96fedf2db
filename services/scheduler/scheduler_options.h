#ifndef COHORT_SERVICES_SCHEDULER_SCHEDULER_OPTIONS_H_
#define COHORT_SERVICES_SCHEDULER_SCHEDULER_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

// What a job's scheduler runs: its flags, typed. scheduler_main reads them from its flags; the
// launcher reads the ones it shares with the scheduler from the same flags
// (COHORT_DEFINE_JOB_FLAGS), checks them with the same ToJobSpec, and writes the scheduler's
// command line with ToArgs.
struct SchedulerOptions {
  int num_workers = 1;
  int num_shards = 1;
  std::string mode = "dist_sync";
  std::string job_id;  // empty: a new one
  double linger_s = 0;
  double baseline_images_per_second = 0;
  std::string on_worker_failure = "fail";
  int min_workers = 1;
  int max_workers = 0;  // 0: num_workers
  double heartbeat_timeout_s = 0;  // 0: AutomaticHeartbeatTimeout (3 s up to 500 members)
  double shard_restart_grace_s = 0;
  int max_shard_restarts = 0;  // per shard rank; 0: no limit
  int shard_replicas = 1;  // 2: every part has a backup on another shard
  double form_timeout_s = 120;
  std::string report_file;  // the job page written at the end (empty: none)

  bool elastic() const { return on_worker_failure == "elastic"; }
  // The one check of these values (InvalidArgument naming the flags), and the job they
  // describe (a new job id when none was given).
  absl::StatusOr<JobSpec> ToJobSpec() const;
  // The scheduler's command line for these options (the timeouts only where they differ from
  // the defaults; the elastic flags only for an elastic job).
  std::vector<std::string> ToArgs() const;
};

}  // namespace cohort

// The flags the launcher and the scheduler share, for a <binary>_main.cc to expand at file
// scope, and JobFlagsInto to read them there.
#define COHORT_DEFINE_JOB_FLAGS()                                                                \
  ABSL_FLAG(std::string, mode, cohort::SchedulerOptions().mode,                                  \
            "kvstore mode of the job: dist_sync or dist_async");                                 \
  ABSL_FLAG(std::string, job_id, "",                                                             \
            "the job's id (letters, digits, '.', '_', '-'); default: a new unique one. Every "    \
            "process gets it as COHORT_JOB_ID");                                                 \
  ABSL_FLAG(double, linger, cohort::SchedulerOptions().linger_s,                                 \
            "seconds the scheduler keeps serving its status and metrics after the job ends, so " \
            "dashboards see how it ended (the launcher waits for it)");                          \
  ABSL_FLAG(double, baseline_images_per_second,                                                  \
            cohort::SchedulerOptions().baseline_images_per_second,                               \
            "images/sec of one worker training alone, for the scaling-efficiency metric (0: "    \
            "unknown)");                                                                         \
  ABSL_FLAG(std::string, on_worker_failure, cohort::SchedulerOptions().on_worker_failure,        \
            "what a worker's death does: fail (the job fails) or elastic (the others go on from " \
            "the shards' newest checkpoint while --min_workers remain; workers may also join, "  \
            "up to --max_workers)");                                                             \
  ABSL_FLAG(int, min_workers, cohort::SchedulerOptions().min_workers,                            \
            "elastic: the fewest workers the job goes on with");                                 \
  ABSL_FLAG(int, max_workers, cohort::SchedulerOptions().max_workers,                            \
            "elastic: the most workers the job takes (0: as many as it starts with)");             \
  ABSL_FLAG(int, shard_replicas, cohort::SchedulerOptions().shard_replicas,                       \
            "copies of every parameter part: 1, or 2 (each part's updates also kept by a backup "\
            "on another shard, on another host where there are several; needs 2 shards or more)");\
  ABSL_FLAG(std::string, report_file, cohort::SchedulerOptions().report_file,                    \
            "when the job ends, the scheduler writes its page (the HTTP port's '/': progress, "  \
            "plots, members, events) to this HTML file, to be opened without a scheduler (the "  \
            "launcher's default: beside the model, MODEL.job.html)")

ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(std::string, job_id);
ABSL_DECLARE_FLAG(double, linger);
ABSL_DECLARE_FLAG(double, baseline_images_per_second);
ABSL_DECLARE_FLAG(std::string, on_worker_failure);
ABSL_DECLARE_FLAG(int, min_workers);
ABSL_DECLARE_FLAG(int, max_workers);
ABSL_DECLARE_FLAG(int, shard_replicas);
ABSL_DECLARE_FLAG(std::string, report_file);

namespace cohort {

// The values of the flags of COHORT_DEFINE_JOB_FLAGS, into `options` (not checked yet).
inline void JobFlagsInto(SchedulerOptions* options) {
  options->mode = absl::GetFlag(FLAGS_mode);
  options->job_id = absl::GetFlag(FLAGS_job_id);
  options->linger_s = absl::GetFlag(FLAGS_linger);
  options->baseline_images_per_second = absl::GetFlag(FLAGS_baseline_images_per_second);
  options->on_worker_failure = absl::GetFlag(FLAGS_on_worker_failure);
  options->min_workers = absl::GetFlag(FLAGS_min_workers);
  options->max_workers = absl::GetFlag(FLAGS_max_workers);
  options->shard_replicas = absl::GetFlag(FLAGS_shard_replicas);
  options->report_file = absl::GetFlag(FLAGS_report_file);
}

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_SCHEDULER_OPTIONS_H_
