// shard: holds a share of the parameters of a job, with their optimizer state, and updates them
// from the workers' pushes. `bazel run //services:shard -- --help` lists the flags.

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "services/common/grpc_util.h"
#include "services/common/http_server.h"
#include "services/common/malloc_tuning.h"
#include "services/common/metrics.h"
#include "services/common/security_flags.h"
#include "services/membership/member_session.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_metrics.h"
#include "services/shard/shard_service.h"
#include "trainer/cli/args.h"

ABSL_FLAG(std::string, scheduler, "", "the job's scheduler, HOST:PORT (required)");
ABSL_FLAG(std::string, bind, "0.0.0.0", "address to listen on");
ABSL_FLAG(int, port, 0, "port to listen on (0: the system picks one; it is printed)");
ABSL_FLAG(std::string, advertise_address, "",
          "where workers dial this shard: HOST (with --port's port) or HOST:PORT (a port mapped "
          "elsewhere); default: the address the scheduler sees it connect from");
ABSL_FLAG(int, rank, -1, "shard rank to ask for (-1: the scheduler assigns one)");
ABSL_FLAG(int, metrics_port, 0,
          "port of the HTTP server for /metrics, on --bind (0: the system picks one; it is printed)");
ABSL_FLAG(std::string, metrics_port_file, "", "also write the metrics port to this file");
ABSL_FLAG(double, scheduler_grace, 3.0,
          "seconds to wait for a lost scheduler to answer again before exiting");

COHORT_DEFINE_SECURITY_FLAGS();

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a parameter shard of a job.\n"
      "  bazel run //services:shard -- --scheduler=HOST:PORT");
  cohort::TuneMallocForBulkTransfers();
  if (!cohort::ParseCanonicalCommandLine("shard", argc, argv, {})) return 2;
  auto security = cohort::SecurityFromFlags("shard");
  if (!security.ok()) {
    std::cerr << "shard: error: " << security.status().message() << "\n";
    return 2;
  }
  cohort::MemberSessionOptions session_options;
  session_options.scheduler_address = absl::GetFlag(FLAGS_scheduler);
  if (session_options.scheduler_address.empty()) {
    std::cerr << "shard: error: --scheduler=HOST:PORT is required\n";
    return 2;
  }
  session_options.role = cohort::v1::SHARD;
  session_options.requested_rank = absl::GetFlag(FLAGS_rank);
  session_options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  session_options.scheduler_grace = absl::Seconds(absl::GetFlag(FLAGS_scheduler_grace));
  session_options.security = *security;

  // The rank is known only after registering, which needs the port: the core learns it late.
  cohort::ShardCore core;
  cohort::ShardService service(&core);
  auto server =
      cohort::StartServer(absl::GetFlag(FLAGS_bind), absl::GetFlag(FLAGS_port), {&service},
                          **security);
  if (!server.ok()) {
    std::cerr << "shard: error: " << server.status().message() << "\n";
    return 1;
  }
  session_options.port = server->port;
  auto session = cohort::MemberSession::Join(session_options);
  if (!session.ok()) {
    std::cerr << "shard: error: " << session.status().message() << "\n";
    return 1;
  }
  core.set_rank((*session)->rank());
  cohort::ProcessMetrics process((*session)->job_id(), "shard", (*session)->rank(), *security);
  cohort::ShardMetrics metrics(process);
  core.set_metrics(&metrics);
  auto http = cohort::ServeMetrics(absl::GetFlag(FLAGS_bind), absl::GetFlag(FLAGS_metrics_port),
                                   absl::GetFlag(FLAGS_metrics_port_file), {process.Route()},
                                   *security);
  if (!http.ok()) {
    std::cerr << "shard " << (*session)->rank() << ": error: " << http.status().message() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat(
                   "shard %d of job %s listening on %s:%d, metrics on http://%s:%d/metrics\n",
                   (*session)->rank(), (*session)->job_id(), absl::GetFlag(FLAGS_bind),
                   server->port, absl::GetFlag(FLAGS_bind), (*http)->port())
            << std::flush;
  (*session)->WaitUntilEnded(absl::InfiniteDuration());
  const absl::Status end = (*session)->end_status();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  core.set_metrics(nullptr);
  (*session)->Leave(absl::OkStatus());
  if (!end.ok()) {
    std::cerr << "shard " << (*session)->rank() << ": stopping: " << end.message() << "\n";
    return 1;
  }
  std::cout << "shard " << (*session)->rank() << ": job done\n";
  return 0;
}
