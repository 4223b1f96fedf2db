// scheduler: one per job. Assigns ranks, publishes the cluster spec, runs barriers, watches
// heartbeats and ends the job (DONE when every worker finished; FAILED, fast, when a member
// dies or reports an error). `bazel run //services:scheduler -- --help` lists the flags.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "services/common/clock.h"
#include "services/common/count_text.h"
#include "trainer/base/crash_report.h"
#include "services/common/data_path_tuning.h"
#include "services/common/durable_file.h"
#include "services/common/grpc_util.h"
#include "services/common/http_server.h"
#include "services/common/metrics.h"
#include "services/common/open_files.h"
#include "services/common/port_file.h"
#include "services/common/security_flags.h"
#include "services/common/termination.h"
#include "services/scheduler/job_history.h"
#include "services/scheduler/job_journal.h"
#include "services/scheduler/job_page.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_metrics.h"
#include "services/scheduler/scheduler_options.h"
#include "services/scheduler/scheduler_service.h"
#include "trainer/cli/args.h"

ABSL_FLAG(std::string, bind, "0.0.0.0", "address to listen on");
ABSL_FLAG(int, port, 0, "port to listen on (0: the system picks one; it is printed)");
ABSL_FLAG(std::string, port_file, "", "also write the port to this file once listening");
ABSL_FLAG(int, num_workers, cohort::SchedulerOptions().num_workers,
          "workers in the job (alias -n for the launcher)");
ABSL_FLAG(int, num_shards, cohort::SchedulerOptions().num_shards, "parameter shards in the job");
ABSL_FLAG(double, heartbeat_timeout, cohort::SchedulerOptions().heartbeat_timeout_s,
          "seconds without a heartbeat after which a member is dead and the job fails (0: 3, "
          "or longer in a job of more than 500 members, whose members beat less often: 6.5 at "
          "1,088)");
ABSL_FLAG(double, shard_restart_grace, cohort::SchedulerOptions().shard_restart_grace_s,
          "seconds a dead shard has to register again under its rank, restarted from its "
          "checkpoint, while the workers wait (0: a shard's death fails the job; launch "
          "--restart_failed_shards sets it)");
ABSL_FLAG(int, max_shard_restarts, cohort::SchedulerOptions().max_shard_restarts,
          "with --shard_restart_grace: a shard dying after its rank was restarted this many "
          "times fails the job (0: no limit; launch --restart_failed_shards sets it)");
ABSL_FLAG(double, form_timeout, cohort::SchedulerOptions().form_timeout_s,
          "seconds to wait for every member to register before the job fails");
ABSL_FLAG(int, metrics_port, 0,
          "port of the HTTP server for /metrics and /status, on --bind (0: the system picks one; "
          "it is printed)");
ABSL_FLAG(std::string, metrics_port_file, "", "also write the metrics port to this file");
ABSL_FLAG(std::string, journal, "",
          "append the workers that finished and the job's end to this file, and take the job "
          "over from what it holds when started again (launch --restart_scheduler); empty: none");
COHORT_DEFINE_JOB_FLAGS();
COHORT_DEFINE_SECURITY_FLAGS();

namespace {

// The job the flags describe; nullopt after saying what is wrong.
std::optional<cohort::JobSpec> JobSpecFromFlags() {
  cohort::SchedulerOptions o;
  o.num_workers = absl::GetFlag(FLAGS_num_workers);
  o.num_shards = absl::GetFlag(FLAGS_num_shards);
  o.heartbeat_timeout_s = absl::GetFlag(FLAGS_heartbeat_timeout);
  o.shard_restart_grace_s = absl::GetFlag(FLAGS_shard_restart_grace);
  o.max_shard_restarts = absl::GetFlag(FLAGS_max_shard_restarts);
  o.form_timeout_s = absl::GetFlag(FLAGS_form_timeout);
  cohort::JobFlagsInto(&o);
  absl::StatusOr<cohort::JobSpec> spec = o.ToJobSpec();
  if (!spec.ok()) {
    std::cerr << "scheduler: error: " << spec.status().message() << "\n";
    return std::nullopt;
  }
  return *std::move(spec);
}

// Says where the scheduler listens (and writes its port file); false after saying what failed.
bool AnnounceListening(const cohort::JobSpec& spec, int port, const cohort::HttpServer& http,
                       const cohort::TransportSecurity& security) {
  const std::string bind = absl::GetFlag(FLAGS_bind);
  std::cout << absl::StrFormat(
                   "scheduler: job %s (%s, %s, %s) listening on %s:%d; job page "
                   "on %s://%s:%d/, status on /status, metrics on /metrics%s\n",
                   spec.job_id, cohort::Count(spec.num_workers, "worker"),
                   cohort::Count(spec.num_shards, "shard"),
                   cohort::KVStoreModeName(spec.mode), bind, port,
                   http.scheme(), bind, http.port(),
                   security.authorization().empty() ? "" : " (with the job's token)")
            << std::flush;
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    if (absl::Status s = cohort::WritePortFile(path, port); !s.ok()) {
      std::cerr << "scheduler: error: " << s.message() << "\n";
      return false;
    }
  }
  return true;
}

// Checks the members' liveness, says the scheduler's notices and records the job's history
// (a snapshot a second) until the job ended; true when it ended DONE.
bool WatchUntilEnded(cohort::SchedulerCore* core, cohort::JobHistory* history) {
  std::atomic<bool> ended{false};
  std::thread monitor([&] {
    absl::Time recorded = absl::InfinitePast();
    while (!ended.load()) {
      core->CheckLiveness();
      if (absl::Now() - recorded >= absl::Seconds(1)) {
        history->Record(core->Status());
        recorded = absl::Now();
      }
      for (const std::string& notice : core->TakeNotices()) {
        // One write: notices come from more than one thread.
        std::cerr << absl::StrCat("scheduler: warning: ", notice, "\n");
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  if (core->WaitUntilEnded(absl::InfiniteDuration())) ended = true;
  monitor.join();
  history->Record(core->Status());  // the end, with the members' last reports
  const bool done = core->state() == cohort::JobState::kDone;
  std::cout << "scheduler: job " << (done ? "DONE: " : "FAILED: ") << core->reason() << "\n"
            << std::flush;
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::ReportCrashes(argv[0]);
  absl::SetProgramUsageMessage(
      "Runs a job's scheduler; shards and workers join it with --scheduler=HOST:PORT.\n"
      "  bazel run //services:scheduler -- --num_workers=2 --num_shards=2 --port=9000");
  cohort::SkipMutexDeadlockBookkeeping();
  if (!cohort::ParseCanonicalCommandLine("scheduler", argc, argv, {})) return 2;
  auto security = cohort::SecurityFromFlags("scheduler");
  if (!security.ok()) {
    std::cerr << "scheduler: error: " << security.status().message() << "\n";
    return 2;
  }
  const std::optional<cohort::JobSpec> job = JobSpecFromFlags();
  if (!job.has_value()) return 2;
  const cohort::JobSpec& spec = *job;
  const absl::Duration linger = absl::Seconds(absl::GetFlag(FLAGS_linger));
  // A connection per member, and some to spare for the pages and the journal.
  const int64_t members = spec.max_workers + static_cast<int64_t>(spec.num_shards);
  if (const int64_t files = cohort::RaiseOpenFileLimit(); files < members + 64) {
    std::cerr << "scheduler: warning: this process may open " << files << " files, too few "
              << "for the connections of " << members << " members; raise its limit (ulimit -n "
              << members + 64 << " or more)\n";
  }

  std::unique_ptr<cohort::JobJournal> journal;
  if (const std::string path = absl::GetFlag(FLAGS_journal); !path.empty()) {
    absl::StatusOr<std::unique_ptr<cohort::JobJournal>> opened =
        cohort::JobJournal::Open(path, spec.job_id);
    if (!opened.ok()) {
      std::cerr << "scheduler: error: " << opened.status().message() << "\n";
      return 1;
    }
    journal = *std::move(opened);
    if (const cohort::JournalState& held = journal->state(); !held.finished_workers.empty() ||
                                                             held.end.has_value()) {
      std::cout << "scheduler: taking job " << spec.job_id << " over from its journal " << path
                << ": " << cohort::DescribeJournal(held) << "\n"
                << std::flush;
    }
  }
  cohort::RealClock clock;
  cohort::SchedulerCore core(spec, &clock, journal.get());
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
  cohort::JobHistory history;
  cohort::ProcessMetrics process(spec.job_id, "scheduler", 0, *security);
  cohort::SchedulerMetrics metrics(process, spec, absl::GetFlag(FLAGS_baseline_images_per_second));
  const std::string bind = absl::GetFlag(FLAGS_bind);
  auto http = cohort::ServeMetrics(
      bind, absl::GetFlag(FLAGS_metrics_port), absl::GetFlag(FLAGS_metrics_port_file),
      {process.Route([&] { metrics.Update(core.TakeSnapshot()); }),
       {"/status", [&] {
          return cohort::HttpResponse{200, "application/json", core.StatusJson()};
        }},
       {"/history", [&] { return cohort::HttpResponse{200, "application/json", history.Json()}; }},
       {"/",
        [] { return cohort::HttpResponse{200, "text/html; charset=utf-8", cohort::JobPageHtml()}; },
        /*open=*/true}},
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
  if (!AnnounceListening(spec, server->port, **http, **security)) return 1;
  const bool done = WatchUntilEnded(&core, &history);
  if (const std::string report = absl::GetFlag(FLAGS_report_file); !report.empty()) {
    if (absl::Status s = cohort::WriteFileAtomically(
            report, cohort::JobReportHtml(core.StatusJson(), history.Json()));
        !s.ok()) {
      std::cerr << "scheduler: warning: cannot write the job page: " << s.message() << "\n";
    } else {
      std::cout << "scheduler: job page written to " << report << "\n" << std::flush;
    }
  }
  // Members learn the end from their next heartbeat's answer and close their streams; a
  // stopped scheduler has about two seconds before its engine kills it.
  core.WaitForMembersToLeave(stop_signal != 0 ? std::min(spec.heartbeat_timeout, absl::Seconds(1))
                                              : spec.heartbeat_timeout);
  if (linger > absl::ZeroDuration() && stop_signal == 0) {
    std::cout << "scheduler: lingering " << absl::FormatDuration(linger) << " (--linger)\n"
              << std::flush;
    absl::SleepFor(linger);
  }
  server->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::seconds(stop_signal != 0 ? 0 : 1));
  if (stop_signal != 0) {
    // Stopping the HTTP server can take its poll's 2 s: nothing is left to serve.
    std::cout << std::flush;
    _exit(128 + stop_signal);
  }
  return done ? 0 : 1;
}
