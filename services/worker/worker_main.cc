// worker: trains a share of a job's data and pushes gradients to the parameter shards. It runs
// the trainer's loop with a distributed kvstore. `bazel run //services:worker -- --help` lists
// the flags; the launcher (//tools:launch) starts workers with the job in COHORT_* variables.

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "services/common/cpu_list.h"
#include "trainer/base/crash_report.h"
#include "services/common/data_path_tuning.h"
#include "services/common/security_flags.h"
#include "services/membership/leave_on_signal.h"
#include "services/membership/member_flags.h"
#include "services/membership/member_session.h"
#include "services/worker/job_kvstore.h"
#include "services/worker/worker_process.h"
#include "trainer/cli/args.h"
#include "trainer/cli/train_flags.h"
#include "trainer/loop/devices.h"
#include "trainer/loop/training.h"

COHORT_DEFINE_TRAIN_FLAGS();
COHORT_DEFINE_SECURITY_FLAGS();
ABSL_FLAG(std::string, scheduler, "",
          "the job's scheduler, HOST:PORT (default: COHORT_SCHEDULER, set by the launcher)");
ABSL_FLAG(int, rank, -1, "worker rank to ask for (-1: COHORT_RANK, else the scheduler assigns)");
ABSL_FLAG(int64_t, part_bytes, 0,
          "largest parameter part on the wire, in bytes (0: COHORT_PART_BYTES, else 1 MiB)");
ABSL_FLAG(int64_t, fusion_bytes, -1,
          "parts smaller than this travel fused into messages of at most this many bytes; 0: "
          "one part a message (-1: COHORT_FUSION_BYTES, else 256 KiB)");
ABSL_FLAG(int64_t, fusion_wait_us, -1,
          "how long a small push may wait for others to fuse with, in microseconds; 0: never "
          "(-1: COHORT_FUSION_WAIT_US, else 1000)");
ABSL_FLAG(std::string, gradient_compression, "",
          "how gradients travel: none, fp16, bf16 (values answer in the same 16 bits), 2bit or "
          "2bit:THRESHOLD (2-bit codes of +-THRESHOLD, default 0.5, the rest kept for the next "
          "step) (default: COHORT_GRADIENT_COMPRESSION, else none)");
ABSL_FLAG(bool, validate_only, false,
          "check the training flags, say what is wrong, and exit (the launcher does this once "
          "before it starts a job)");
ABSL_FLAG(int, validate_data, 0,
          "with --validate_only: also open the training data and check it holds a step of this "
          "many workers (0: don't; the launcher asks for this when the workers run on its "
          "machine)");
COHORT_DEFINE_MEMBER_FLAGS();
ABSL_FLAG(std::string, metrics_bind, "",
          "address of the HTTP server for /metrics (default: COHORT_METRICS_BIND, else 0.0.0.0)");
ABSL_FLAG(int, metrics_port, 0,
          "port of the HTTP server for /metrics (default: COHORT_METRICS_PORT; 0: the system "
          "picks one; it is printed)");
ABSL_FLAG(std::string, metrics_port_file, "",
          "also write the metrics port to this file (default: COHORT_METRICS_PORT_FILE)");

int main(int argc, char** argv) {
  cohort::ReportCrashes(argv[0]);
  absl::SetProgramUsageMessage(
      "Runs a worker of a job: the training loop over a distributed kvstore.\n"
      "  bazel run //services:worker -- --scheduler=HOST:PORT --model=lenet");
  cohort::TuneForDataPath();
  absl::SetFlag(&FLAGS_kv_store, "dist_sync");
  if (!cohort::ParseCanonicalCommandLine("worker", argc, argv, cohort::StandardFlagAliases())) return 2;
  const cohort::TrainOptions options = cohort::TrainOptionsFromFlags();
  if (absl::Status s = cohort::ValidateTrainOptions(options); !s.ok()) {
    std::cerr << "worker: error: " << s.message() << "\n";
    return 2;
  }
  const auto compression = cohort::ParseGradientCompression(absl::GetFlag(FLAGS_gradient_compression));
  if (!compression.ok()) {
    std::cerr << "worker: error: " << compression.status().message() << "\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_validate_only)) {
    if (absl::GetFlag(FLAGS_validate_data) <= 0) return 0;
    if (absl::Status s = cohort::CheckTrainingData(options, absl::GetFlag(FLAGS_validate_data));
        !s.ok()) {
      std::cerr << "worker: error: " << s.message() << "\n";
      return 2;
    }
    return 0;
  }

  // The launcher's slice of this host's CPUs for this worker: confined before any thread starts,
  // its OpenMP team and every other thread of it stay off the other workers' cores.
  if (const char* cpus = std::getenv("COHORT_CPUS"); cpus != nullptr && *cpus != '\0') {
    auto list = cohort::ParseCpuList(cpus);
    const absl::Status confined = list.ok() ? cohort::ConfineToCpus(*list) : list.status();
    if (!confined.ok()) {
      std::cerr << "worker: error: COHORT_CPUS: " << confined.message()
                << " (unset it, or give some of the CPUs this process may use: "
                << cohort::FormatCpuList(cohort::AllowedCpus()) << ")\n";
      return 2;
    }
  }

  // The flags' security, else the job's from the environment (the launcher's).
  std::shared_ptr<const cohort::TransportSecurity> security;
  if (cohort::SecurityFlagsGiven()) {
    auto from_flags = cohort::SecurityFromFlags("worker");
    if (!from_flags.ok()) {
      std::cerr << "worker: error: " << from_flags.status().message() << "\n";
      return 2;
    }
    security = *from_flags;
  }
  auto from_env = cohort::JobOptionsFromEnvironment(absl::GetFlag(FLAGS_scheduler), security);
  if (!from_env.ok()) {
    std::cerr << "worker: error: "
              << (absl::GetFlag(FLAGS_scheduler).empty() ? "no --scheduler, and " : "")
              << from_env.status().message() << "\n";
    return 2;
  }
  cohort::JobOptions job = *from_env;
  if (absl::GetFlag(FLAGS_rank) >= 0) job.requested_rank = absl::GetFlag(FLAGS_rank);
  if (absl::GetFlag(FLAGS_part_bytes) != 0) job.part_bytes = absl::GetFlag(FLAGS_part_bytes);
  if (absl::GetFlag(FLAGS_fusion_bytes) >= 0) job.fusion_bytes = absl::GetFlag(FLAGS_fusion_bytes);
  if (absl::GetFlag(FLAGS_fusion_wait_us) >= 0) {
    job.fusion_wait = absl::Microseconds(absl::GetFlag(FLAGS_fusion_wait_us));
  }
  if (!absl::GetFlag(FLAGS_gradient_compression).empty()) job.compression = *compression;
  job.scheduler_grace = cohort::SchedulerGraceFlag();
  job.connect_timeout = cohort::ConnectTimeoutFlag();
  if (!absl::GetFlag(FLAGS_metrics_bind).empty()) job.metrics_bind = absl::GetFlag(FLAGS_metrics_bind);
  if (absl::GetFlag(FLAGS_metrics_port) != 0) job.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (!absl::GetFlag(FLAGS_metrics_port_file).empty()) {
    job.metrics_port_file = absl::GetFlag(FLAGS_metrics_port_file);
  }

  // Stopped (SIGTERM/SIGINT): leaves the job and exits; the training loop is not waited for.
  cohort::LeaveOnTerminationSignal("worker");
  auto worker = cohort::WorkerProcess::Join(job, cohort::ProcessComputeThreads());
  if (!worker.ok()) {
    std::cerr << "worker: error: " << worker.status().message() << "\n";
    return 1;
  }
  cohort::MemberSession* member = (*worker)->member();
  const cohort::LeavingOnSignal leaving(member);
  std::cout << "worker " << member->rank() << ": metrics on " << (*worker)->metrics_scheme()
            << "://" << job.metrics_bind << ":" << (*worker)->metrics_port()
            << "/metrics; parts of at most " << job.part_bytes << " bytes, fused below "
            << job.fusion_bytes << " (waiting up to " << absl::FormatDuration(job.fusion_wait)
            << "), gradient compression "
            << cohort::GradientCompressionName(job.compression) << "\n"
            << std::flush;
  auto result = cohort::Train(
      options,
      [&](absl::string_view type) {
        return cohort::CreateDistKVStore(type, member, job);
      },
      std::cout, (*worker)->metrics());
  member->Leave(result.status());
  if (!result.ok()) {
    cohort::YieldToStopSignal(absl::Seconds(1));
    std::cerr << "worker " << member->rank() << ": error: " << result.status().message() << "\n";
    return 1;
  }
  return 0;
}
