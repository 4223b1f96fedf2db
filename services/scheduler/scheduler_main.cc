// scheduler: one per job. Assigns ranks, publishes the cluster spec, runs barriers, watches
// heartbeats and ends the job (DONE when every worker finished; FAILED, fast, when a member
// dies or reports an error). `bazel run //services:scheduler -- --help` lists the flags.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "services/common/clock.h"
#include "services/common/grpc_util.h"
#include "services/common/http_server.h"
#include "services/common/job_id.h"
#include "services/common/metrics.h"
#include "services/common/port_file.h"
#include "services/common/security_flags.h"
#include "services/common/termination.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_metrics.h"
#include "services/scheduler/scheduler_service.h"
#include "trainer/cli/args.h"

ABSL_FLAG(std::string, bind, "0.0.0.0", "address to listen on");
ABSL_FLAG(int, port, 0, "port to listen on (0: the system picks one; it is printed)");
ABSL_FLAG(std::string, port_file, "", "also write the port to this file once listening");
ABSL_FLAG(int, num_workers, 1, "workers in the job (alias -n for the launcher)");
ABSL_FLAG(int, num_shards, 1, "parameter shards in the job");
ABSL_FLAG(std::string, mode, "dist_sync", "kvstore mode of the job: dist_sync or dist_async");
ABSL_FLAG(std::string, job_id, "", "the job's id (default: generated)");
ABSL_FLAG(double, heartbeat_timeout, 3.0,
          "seconds without a heartbeat after which a member is dead and the job fails");
ABSL_FLAG(double, shard_restart_grace, 0.0,
          "seconds a dead shard has to register again under its rank, restarted from its "
          "checkpoint, while the workers wait (0: a shard's death fails the job; launch "
          "--restart_failed_shards sets it)");
ABSL_FLAG(std::string, on_worker_failure, "fail",
          "what a worker's death does: fail (the job fails) or elastic (the job goes on with the "
          "others, from the shards' newest checkpoint, while --min_workers remain; workers may "
          "also join, up to --max_workers)");
ABSL_FLAG(int, min_workers, 1, "elastic: the fewest workers the job goes on with");
ABSL_FLAG(int, max_workers, 0, "elastic: the most workers the job takes (0: --num_workers)");
ABSL_FLAG(double, form_timeout, 120.0,
          "seconds to wait for every member to register before the job fails");
ABSL_FLAG(double, linger, 0.0,
          "seconds to keep serving after the job ended, so dashboards see how it ended");
ABSL_FLAG(int, metrics_port, 0,
          "port of the HTTP server for /metrics and /status, on --bind (0: the system picks one; "
          "it is printed)");
ABSL_FLAG(std::string, metrics_port_file, "", "also write the metrics port to this file");
ABSL_FLAG(double, baseline_images_per_second, 0,
          "images/sec of one worker training alone, for the scaling-efficiency metric (0: "
          "unknown)");

COHORT_DEFINE_SECURITY_FLAGS();

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a job's scheduler; shards and workers join it with --scheduler=HOST:PORT.\n"
      "  bazel run //services:scheduler -- --num_workers=2 --num_shards=2 --port=9000");
  if (!cohort::ParseCanonicalCommandLine("scheduler", argc, argv, {})) return 2;
  auto security = cohort::SecurityFromFlags("scheduler");
  if (!security.ok()) {
    std::cerr << "scheduler: error: " << security.status().message() << "\n";
    return 2;
  }
  cohort::JobSpec spec;
  spec.job_id = absl::GetFlag(FLAGS_job_id);
  if (spec.job_id.empty()) {
    spec.job_id = cohort::NewJobId();
  }
  spec.num_workers = absl::GetFlag(FLAGS_num_workers);
  spec.num_shards = absl::GetFlag(FLAGS_num_shards);
  spec.heartbeat_timeout = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout));
  spec.form_timeout = absl::Seconds(absl::GetFlag(FLAGS_form_timeout));
  spec.shard_restart_grace = absl::Seconds(absl::GetFlag(FLAGS_shard_restart_grace));
  const absl::Duration linger = absl::Seconds(absl::GetFlag(FLAGS_linger));
  if (spec.num_workers < 1 || spec.num_shards < 1) {
    std::cerr << "scheduler: error: --num_workers and --num_shards must be >= 1\n";
    return 2;
  }
  const std::string on_worker_failure = absl::GetFlag(FLAGS_on_worker_failure);
  spec.elastic = on_worker_failure == "elastic";
  spec.min_workers = absl::GetFlag(FLAGS_min_workers);
  spec.max_workers = absl::GetFlag(FLAGS_max_workers);
  if (spec.max_workers == 0) spec.max_workers = spec.num_workers;
  if ((on_worker_failure != "fail" && !spec.elastic) || spec.min_workers < 1 ||
      spec.min_workers > spec.num_workers || spec.max_workers < spec.num_workers) {
    std::cerr << "scheduler: error: --on_worker_failure=" << on_worker_failure
              << " --min_workers=" << spec.min_workers << " --max_workers=" << spec.max_workers
              << ": expected fail or elastic, and 1 <= min_workers <= num_workers ("
              << spec.num_workers << ") <= max_workers\n";
    return 2;
  }
  const absl::StatusOr<cohort::KVStoreMode> mode = cohort::ParseKVStoreMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok() || *mode == cohort::KVStoreMode::kLocal) {
    std::cerr << "scheduler: error: --mode=" << absl::GetFlag(FLAGS_mode)
              << ": expected dist_sync or dist_async\n";
    return 2;
  }
  spec.mode = *mode;

  cohort::RealClock clock;
  cohort::SchedulerCore core(spec, &clock);
  // Stopped (a container engine, Kubernetes, scancel): the job ends FAILED saying why, and the
  // members hear it from their next heartbeat's answer. Whatever main is doing then (waiting
  // for members, lingering, stopping its servers; the job may have ended just before), the
  // process is gone 1.5 s later: engines kill it at 2 s.
  std::atomic<int> stop_signal{0};
  cohort::OnTerminationSignal([&](int signo) {
    stop_signal = signo;
    core.Stop(absl::StrCat("the scheduler was stopped by ", cohort::TerminationSignalName(signo)));
    absl::SleepFor(absl::Milliseconds(1500));
    std::cout << std::flush;
    _exit(128 + signo);
  });
  cohort::SchedulerService service(&core);
  cohort::ProcessMetrics process(spec.job_id, "scheduler", 0, *security);
  cohort::SchedulerMetrics metrics(process, spec, absl::GetFlag(FLAGS_baseline_images_per_second));
  const std::string bind = absl::GetFlag(FLAGS_bind);
  auto http = cohort::ServeMetrics(
      bind, absl::GetFlag(FLAGS_metrics_port), absl::GetFlag(FLAGS_metrics_port_file),
      {process.Route([&] { metrics.Update(core.TakeSnapshot()); }),
       {"/status", [&] {
          return cohort::HttpResponse{200, "application/json", core.StatusJson()};
        }}},
      *security);
  if (!http.ok()) {
    std::cerr << "scheduler: error: " << http.status().message() << "\n";
    return 1;
  }
  auto server = cohort::StartServer(bind, absl::GetFlag(FLAGS_port), {&service}, **security);
  if (!server.ok()) {
    std::cerr << "scheduler: error: " << server.status().message() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat(
                   "scheduler: job %s (%d workers, %d shards, %s) listening on %s:%d; status on "
                   "http://%s:%d/status, metrics on /metrics%s\n",
                   spec.job_id, spec.num_workers, spec.num_shards,
                   cohort::KVStoreModeName(spec.mode), bind, server->port, bind, (*http)->port(),
                   (*security)->authorization().empty() ? "" : " (with the job's token)")
            << std::flush;
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    if (absl::Status s = cohort::WritePortFile(path, server->port); !s.ok()) {
      std::cerr << "scheduler: error: " << s.message() << "\n";
      return 1;
    }
  }

  std::atomic<bool> ended{false};
  std::thread monitor([&] {
    while (!ended.load()) {
      core.CheckLiveness();
      for (const std::string& notice : core.TakeNotices()) {
        // One write: notices come from more than one thread.
        std::cerr << absl::StrCat("scheduler: warning: ", notice, "\n");
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  if (core.WaitUntilEnded(absl::InfiniteDuration())) ended = true;
  monitor.join();
  const bool done = core.state() == cohort::JobState::kDone;
  std::cout << "scheduler: job " << (done ? "DONE: " : "FAILED: ") << core.reason() << "\n"
            << std::flush;
  // Members learn the end from their next heartbeat's answer and close their streams; a
  // stopped scheduler has about two seconds before its engine kills it.
  core.WaitForMembersToLeave(stop_signal != 0 ? std::min(spec.heartbeat_timeout, absl::Seconds(1))
                                              : spec.heartbeat_timeout);
  if (linger > absl::ZeroDuration() && stop_signal == 0) {
    std::cout << "scheduler: lingering " << absl::FormatDuration(linger) << " (--linger)\n"
              << std::flush;
    absl::SleepFor(linger);
  }
  server->server->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::seconds(stop_signal != 0 ? 0 : 1));
  if (stop_signal != 0) {
    // Stopping the HTTP server can take its poll's 2 s: nothing is left to serve.
    std::cout << std::flush;
    _exit(128 + stop_signal);
  }
  return done ? 0 : 1;
}
