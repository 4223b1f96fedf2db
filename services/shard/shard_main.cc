// shard: holds a share of the parameters of a job, with their optimizer state, and updates them
// from the workers' pushes. `bazel run //services:shard -- --help` lists the flags.

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "services/common/addresses.h"
#include "services/common/grpc_util.h"
#include "services/common/http_server.h"
#include "services/common/data_path_tuning.h"
#include "services/common/metrics.h"
#include "services/common/security_flags.h"
#include "services/membership/leave_on_signal.h"
#include "services/membership/member_session.h"
#include "services/checkpoint/checkpoint_files.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "services/shard/shard_checkpointer.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_metrics.h"
#include "services/shard/shard_service.h"
#include "services/shard/shm_push_server.h"
#include "services/wire/shm_rendezvous.h"
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
ABSL_FLAG(std::string, checkpoint_dir, "",
          "write checkpoints here: a folder per step, v<step>, with every shard's file and "
          "manifest (the shards of a job share it: one folder, or one network file system)");
ABSL_FLAG(int64_t, checkpoint_every, 0, "steps between checkpoints (0: none)");
ABSL_FLAG(int, checkpoint_keep, 3, "complete checkpoints to keep; older ones are removed");
ABSL_FLAG(std::string, resume, "",
          "start from the newest complete checkpoint under this folder (a damaged or partial "
          "one is named and skipped); checkpoints go on there unless --checkpoint_dir is given");
ABSL_FLAG(double, scheduler_grace, 3.0,
          "seconds to wait for a lost scheduler to answer again before exiting");

COHORT_DEFINE_SECURITY_FLAGS();

// Each shared-memory ring's bytes: gRPC's message limit, so that what a stream takes, a ring
// takes (a part of --part_bytes, 1 MiB by default, or a fusion, many times over).
constexpr size_t kShmRingBytes = cohort::kMaxMessageBytes;

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a parameter shard of a job.\n"
      "  bazel run //services:shard -- --scheduler=HOST:PORT");
  cohort::TuneForDataPath();
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
  const std::string resume = absl::GetFlag(FLAGS_resume);
  std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (checkpoint_dir.empty()) checkpoint_dir = resume;
  const int64_t checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  if (checkpoint_every < 0 || (checkpoint_every > 0 && checkpoint_dir.empty()) ||
      absl::GetFlag(FLAGS_checkpoint_keep) < 1) {
    std::cerr << "shard: error: --checkpoint_every needs --checkpoint_dir (or --resume), steps "
                 ">= 0, and --checkpoint_keep >= 1\n";
    return 2;
  }

  // The rank is known only after registering, which needs the port: the core learns it late,
  // and rank 0's Init waits until the core is set up.
  cohort::ShardCore core;
  absl::Notification set_up;
  // Known once registered, before set_up; a roll back waits for set_up.
  int rank = -1;
  int num_shards = 0;
  cohort::ShardMetrics* shard_metrics = nullptr;
  std::unique_ptr<cohort::ShardCheckpointer> checkpointer;
  // The shard's parts start from `step` (a resume, a roll back): said, counted, and when the
  // shard checkpoints into that folder its files of later checkpoints go (they are written
  // again, and a folder never mixes two runs' files).
  const auto started_at = [&](int64_t step, const std::string& folder,
                              absl::string_view what) -> absl::Status {
    std::cout << absl::StrFormat("shard %d: %s step %d (%s)\n", rank, what, step,
                                 cohort::CheckpointFolder(folder, step))
              << std::flush;
    shard_metrics->resumed_step.Set(static_cast<double>(step));
    if (checkpoint_every == 0 || checkpoint_dir != folder) return absl::OkStatus();
    return cohort::RemoveShardFilesAfter(folder, rank, step);
  };
  cohort::ShardService::RollBackHooks roll_back;
  if (!checkpoint_dir.empty()) {
    roll_back.load = [&](int64_t step) {
      return cohort::LoadShardCheckpoint(checkpoint_dir, step, rank, num_shards);
    };
    roll_back.rolled_back = [&](int64_t step) {
      if (checkpointer != nullptr) checkpointer->Flush();  // no write of a later step after this
      return started_at(step, checkpoint_dir, "rolling back to");
    };
    roll_back.steps = [&] { return cohort::ShardCheckpointSteps(checkpoint_dir, rank); };
    roll_back.flush = [&] {
      if (checkpointer != nullptr) checkpointer->Flush();
    };
  }
  cohort::ShardService service(&core, &set_up, std::move(roll_back));
  // Stopped (SIGTERM/SIGINT): leaves the job and exits at once.
  static std::atomic<cohort::MemberSession*> member{nullptr};
  cohort::LeaveOnTerminationSignal("shard", &member);
  auto server =
      cohort::StartServer(absl::GetFlag(FLAGS_bind), absl::GetFlag(FLAGS_port), {&service},
                          **security);
  if (!server.ok()) {
    std::cerr << "shard: error: " << server.status().message() << "\n";
    return 1;
  }
  // Workers on this host push through shared memory (their rendezvous name is the gRPC
  // address's).
  std::unique_ptr<cohort::ShmPushServer> shm;
  if (absl::GetFlag(FLAGS_shared_memory)) {
    const std::string bind = absl::GetFlag(FLAGS_bind);
    auto started = cohort::ShmPushServer::Start(
        &core, cohort::ShardRendezvousName(cohort::IsAnyAddress(bind) ? "" : bind, server->port),
        kShmRingBytes);
    if (started.ok()) {
      shm = *std::move(started);
    } else {  // another process holds the name: its workers' pushes come over gRPC
      std::cerr << "shard: warning: no shared-memory path for this host's workers: "
                << started.status().message() << "\n";
    }
  }
  session_options.port = server->port;
  auto session = cohort::MemberSession::Join(session_options);
  if (!session.ok()) {
    std::cerr << "shard: error: " << session.status().message() << "\n";
    return 1;
  }
  member = session->get();
  rank = (*session)->rank();
  num_shards = (*session)->num_shards();
  core.set_rank(rank);
  cohort::ProcessMetrics process((*session)->job_id(), "shard", rank, *security);
  cohort::ShardMetrics metrics(process);
  shard_metrics = &metrics;
  core.set_metrics(&metrics);
  if (!resume.empty()) {
    auto point = cohort::LoadLatestShardCheckpoint(resume, rank, (*session)->num_shards());
    if (!point.ok()) {
      const absl::Status error(point.status().code(),
                               absl::StrCat("shard ", rank, ": cannot resume from ", resume, ": ",
                                            point.status().message()));
      std::cerr << error.message() << "\n";
      (*session)->Leave(error);
      return 1;
    }
    for (const std::string& line : point->refused) {
      std::cerr << "shard " << rank << ": skipping a newer checkpoint: " << line << "\n";
    }
    if (absl::Status s = started_at(point->checkpoint.step, resume, "resuming from"); !s.ok()) {
      std::cerr << "shard " << rank << ": error: " << s.message() << "\n";
      (*session)->Leave(s);
      return 1;
    }
    core.ResumeFrom(std::move(point->checkpoint));
  }
  if (checkpoint_every > 0) {
    checkpointer = std::make_unique<cohort::ShardCheckpointer>(
        cohort::ShardCheckpointerOptions{checkpoint_dir, absl::GetFlag(FLAGS_checkpoint_keep), rank,
                                         (*session)->num_shards()},
        &metrics, &std::cout);
    core.set_checkpoints(checkpoint_every, checkpointer.get());
  }
  set_up.Notify();
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
  shm.reset();
  checkpointer.reset();  // writes what is queued
  core.set_metrics(nullptr);
  (*session)->Leave(absl::OkStatus());
  if (!end.ok()) {
    std::cerr << "shard " << (*session)->rank() << ": stopping: " << end.message() << "\n";
    return 1;
  }
  std::cout << "shard " << (*session)->rank() << ": job done\n";
  return 0;
}
