// shard: holds a share of the parameters of a job, with their optimizer state, and updates them
// from the workers' pushes. `bazel run //services:shard -- --help` lists the flags.

#include <iostream>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "services/checkpoint/checkpoint_options.h"
#include "trainer/base/crash_report.h"
#include "services/common/data_path_tuning.h"
#include "services/common/open_files.h"
#include "services/common/security_flags.h"
#include "services/membership/leave_on_signal.h"
#include "services/membership/member_flags.h"
#include "services/shard/shard_process.h"
#include "trainer/cli/args.h"

ABSL_FLAG(std::string, scheduler, "", "the job's scheduler, HOST:PORT (required)");
ABSL_FLAG(std::string, bind, "0.0.0.0", "address to listen on");
ABSL_FLAG(int, port, 0, "port to listen on (0: the system picks one; it is printed)");
ABSL_FLAG(std::string, advertise_address, "",
          "where workers dial this shard: HOST (with --port's port) or HOST:PORT (a port mapped "
          "elsewhere); default: the address the scheduler sees it connect from");
ABSL_FLAG(int, rank, -1, "shard rank to ask for (-1: the scheduler assigns one)");
ABSL_FLAG(bool, shared_memory, true,
          "offer workers on this host a shared-memory path for their pushes and answers");
ABSL_FLAG(int, metrics_port, 0,
          "port of the HTTP server for /metrics, on --bind (0: the system picks one; it is printed)");
ABSL_FLAG(std::string, metrics_port_file, "", "also write the metrics port to this file");
COHORT_DEFINE_CHECKPOINT_FLAGS();
COHORT_DEFINE_MEMBER_FLAGS();

COHORT_DEFINE_SECURITY_FLAGS();

namespace {

// How the shard joins its job, from the flags; nullopt after saying what is wrong.
std::optional<cohort::MemberSessionOptions> SessionOptionsFromFlags() {
  auto security = cohort::SecurityFromFlags("shard");
  if (!security.ok()) {
    std::cerr << "shard: error: " << security.status().message() << "\n";
    return std::nullopt;
  }
  cohort::MemberSessionOptions o;
  o.scheduler_address = absl::GetFlag(FLAGS_scheduler);
  if (o.scheduler_address.empty()) {
    std::cerr << "shard: error: --scheduler=HOST:PORT is required\n";
    return std::nullopt;
  }
  o.role = cohort::v1::SHARD;
  o.requested_rank = absl::GetFlag(FLAGS_rank);
  o.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  o.scheduler_grace = cohort::SchedulerGraceFlag();
  o.connect_timeout = cohort::ConnectTimeoutFlag();
  o.security = *security;
  return o;
}

// The shard's options from the flags; nullopt after saying what is wrong.
std::optional<cohort::ShardProcessOptions> OptionsFromFlags() {
  std::optional<cohort::MemberSessionOptions> session = SessionOptionsFromFlags();
  if (!session.has_value()) return std::nullopt;
  cohort::ShardProcessOptions o;
  o.session = *std::move(session);
  o.bind = absl::GetFlag(FLAGS_bind);
  o.port = absl::GetFlag(FLAGS_port);
  o.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  o.checkpoints = cohort::CheckpointOptionsFromFlags();
  if (absl::Status s = o.checkpoints.Validate(); !s.ok()) {
    std::cerr << "shard: error: " << s.message() << "\n";
    return std::nullopt;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::ReportCrashes(argv[0]);
  absl::SetProgramUsageMessage(
      "Runs a parameter shard of a job.\n"
      "  bazel run //services:shard -- --scheduler=HOST:PORT");
  cohort::TuneForDataPath();
  cohort::RaiseOpenFileLimit();  // a connection per worker
  if (!cohort::ParseCanonicalCommandLine("shard", argc, argv, {})) return 2;
  std::optional<cohort::ShardProcessOptions> options = OptionsFromFlags();
  if (!options.has_value()) return 2;
  // Stopped (SIGTERM/SIGINT): leaves the job and exits at once.
  cohort::LeaveOnTerminationSignal("shard");
  absl::StatusOr<std::unique_ptr<cohort::ShardProcess>> shard =
      cohort::ShardProcess::Start(*std::move(options));
  absl::Status end = shard.ok() ? (*shard)->ServeUntilEnded() : shard.status();
  if (!end.ok()) {
    std::cerr << end.message() << "\n";
    return 1;
  }
  std::cout << "shard " << (*shard)->rank() << ": job done\n";
  return 0;
}
