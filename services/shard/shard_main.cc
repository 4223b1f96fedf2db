// shard: holds a share of the parameters of a job, with their optimizer state, and updates them
// from the workers' pushes. `bazel run //services:shard -- --help` lists the flags.

#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "services/checkpoint/checkpoint_options.h"
#include "services/common/addresses.h"
#include "services/common/crash_report.h"
#include "services/common/grpc_util.h"
#include "services/common/http_server.h"
#include "services/common/data_path_tuning.h"
#include "services/common/metrics.h"
#include "services/common/open_files.h"
#include "services/common/security_flags.h"
#include "services/membership/leave_on_signal.h"
#include "services/membership/member_flags.h"
#include "services/membership/member_session.h"
#include "services/shard/grpc_replica_link.h"
#include "services/shard/replica_link.h"
#include "services/shard/shard_checkpointer.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_metrics.h"
#include "services/shard/shard_rollback.h"
#include "services/shard/shard_service.h"
#include "services/shard/share_copier.h"
#include "services/shard/shm_push_server.h"
#include "services/shard/shm_replica_link.h"
#include "services/wire/shm_rendezvous.h"
#include "trainer/base/status_macros.h"
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

// Each shared-memory ring's bytes: gRPC's message limit, so that what a stream takes, a ring
// takes (a part of --part_bytes, 1 MiB by default, or a fusion, many times over).
constexpr size_t kShmRingBytes = cohort::kMaxMessageBytes;
// The pool a backup offers each leader of its host beside the rings, which the leader's updates
// are made in (shm_replica_link.h): 64 MiB of updates not yet acknowledged (a 100 MB model's
// half a round); beyond it updates go through the ring. Pages are taken as first written.
constexpr size_t kReplicaPoolBytes = 4 * kShmRingBytes;

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

// Workers on this host push through shared memory, and shards leading parts this one backs up
// replicate through it (under the rendezvous names of the gRPC address); none where
// --shared_memory is off or another process holds a name: those come over gRPC.
struct SharedMemoryPaths {
  std::unique_ptr<cohort::ShmSessionServer> pushes, replicas;
};
SharedMemoryPaths OfferSharedMemory(cohort::ShardCore* core, cohort::ReplicaReceiver* receiver,
                                    int port) {
  SharedMemoryPaths paths;
  if (!absl::GetFlag(FLAGS_shared_memory)) return paths;
  const std::string bind = absl::GetFlag(FLAGS_bind);
  const std::string host = cohort::IsAnyAddress(bind) ? "" : bind;
  auto pushes = cohort::StartShmPushServer(core, cohort::ShardRendezvousName(host, port),
                                           kShmRingBytes);
  auto replicas = cohort::StartShmReplicaServer(
      receiver, cohort::ReplicaRendezvousName(host, port), kShmRingBytes, kReplicaPoolBytes);
  if (!pushes.ok()) {
    std::cerr << "shard: warning: no shared-memory path for this host's workers: "
              << pushes.status().message() << "\n";
  }
  if (!replicas.ok()) {
    std::cerr << "shard: warning: no shared-memory path for the shards of this host it backs "
                 "up: "
              << replicas.status().message() << "\n";
  }
  if (pushes.ok()) paths.pushes = *std::move(pushes);
  if (replicas.ok()) paths.replicas = *std::move(replicas);
  return paths;
}

// The link to the backup at `address`: through shared memory when it is on this host and offers
// it, else its Replicate stream.
std::unique_ptr<cohort::ReplicaLink> LinkToBackup(
    const std::string& address, int rank,
    const std::shared_ptr<const cohort::TransportSecurity>& security) {
  std::unique_ptr<cohort::ReplicaStream> stream;
  if (absl::GetFlag(FLAGS_shared_memory)) {
    absl::StatusOr<std::unique_ptr<cohort::ShmReplicaStream>> shm =
        cohort::DialShmReplica(address);
    if (shm.ok()) {
      std::cout << "shard " << rank << ": replicates to its backup at " << address
                << " through shared memory\n";
      stream = *std::move(shm);
    } else if (!absl::IsNotFound(shm.status())) {
      std::cerr << "shard " << rank << ": warning: its backup at " << address
                << " is on this host, but its shared-memory path failed ("
                << shm.status().message() << "); replicating to it over gRPC\n";
    }
  }
  if (stream == nullptr) {
    stream = std::make_unique<cohort::GrpcReplicaStream>(
        cohort::v1::Shard::NewStub(cohort::MakeChannel(address, *security)));
  }
  return std::make_unique<cohort::StreamReplicaLink>(std::move(stream),
                                                     absl::StrCat("shard ", rank),
                                                     absl::StrCat("the shard at ", address),
                                                     &std::cerr);
}

// Serves the job until it ends: the exit status.
int ServeUntilEnded(cohort::MemberSession* session, const cohort::RunningServer& server,
                    const cohort::ProcessMetrics& process,
                    std::shared_ptr<const cohort::TransportSecurity> security) {
  auto http = cohort::ServeMetrics(absl::GetFlag(FLAGS_bind), absl::GetFlag(FLAGS_metrics_port),
                                   absl::GetFlag(FLAGS_metrics_port_file), {process.Route()},
                                   std::move(security));
  if (!http.ok()) {
    std::cerr << "shard " << session->rank() << ": error: " << http.status().message() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat(
                   "shard %d of job %s listening on %s:%d, metrics on %s://%s:%d/metrics\n",
                   session->rank(), session->job_id(), absl::GetFlag(FLAGS_bind), server.port,
                   (*http)->scheme(),
                   absl::GetFlag(FLAGS_bind), (*http)->port())
            << std::flush;
  session->WaitUntilEnded(absl::InfiniteDuration());
  return 0;
}

// The shares a shard resumes: its own, and with replicated shards those it backs up as the
// workers place them (ShardsView::BackupOf), known once every shard has joined.
absl::StatusOr<std::vector<int>> StartingShares(cohort::MemberSession* session, int rank) {
  std::vector<int> shares = {rank};
  if (session->shard_replicas() < 2) return shares;
  ASSIGN_OR_RETURN(const cohort::ShardsView view, session->WaitForShards());
  for (int share = 0; share < static_cast<int>(view.addresses.size()); ++share) {
    if (share != rank && view.BackupOf(share) == rank) shares.push_back(share);
  }
  return shares;
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
  std::optional<cohort::MemberSessionOptions> session_options = SessionOptionsFromFlags();
  if (!session_options.has_value()) return 2;
  const cohort::CheckpointOptions checkpoints = cohort::CheckpointOptionsFromFlags();
  if (absl::Status s = checkpoints.Validate(); !s.ok()) {
    std::cerr << "shard: error: " << s.message() << "\n";
    return 2;
  }
  const std::string checkpoint_dir = checkpoints.folder();

  // The rank is known only after registering, which needs the port: the core and the roll
  // back learn it late, and rank 0's Init and RollBack wait until the shard is set up.
  cohort::ShardCore core;
  absl::Notification set_up;
  cohort::ShardRollback rollback(&core, checkpoint_dir, checkpoints.checkpoint_every > 0,
                                 &std::cout, &std::cerr);
  std::atomic<int> shard_rank{-1};  // for the link's messages, once registered
  const std::shared_ptr<const cohort::TransportSecurity> security = session_options->security;
  cohort::ShardService service(
      &core, &set_up, &rollback,
      [&shard_rank, security](const std::string& address) {
        return LinkToBackup(address, shard_rank.load(), security);
      });
  // Stopped (SIGTERM/SIGINT): leaves the job and exits at once.
  cohort::LeaveOnTerminationSignal("shard");
  auto server = cohort::StartServer(absl::GetFlag(FLAGS_bind), absl::GetFlag(FLAGS_port),
                                    {&service}, *security);
  if (!server.ok()) {
    std::cerr << "shard: error: " << server.status().message() << "\n";
    return 1;
  }
  SharedMemoryPaths shm = OfferSharedMemory(&core, &service, server->port);
  session_options->port = server->port;
  auto session = cohort::MemberSession::Join(*session_options);
  if (!session.ok()) {
    std::cerr << "shard: error: " << session.status().message() << "\n";
    return 1;
  }
  const cohort::LeavingOnSignal leaving(session->get());
  const int rank = (*session)->rank();
  core.set_rank(rank);
  shard_rank = rank;
  cohort::ProcessMetrics process((*session)->job_id(), "shard", rank, security);
  cohort::ShardMetrics metrics(process);
  core.set_metrics(&metrics);
  rollback.SetUp(rank, (*session)->num_shards(), &metrics);
  std::unique_ptr<cohort::ShardCheckpointer> checkpointer;
  // However main ends from here, what serves the job stops before what it reports to goes:
  // the server's handlers and the shared-memory streams, then the checkpoint writer (it writes
  // what is queued); and the core stops reporting to the metrics.
  auto stop_serving = absl::MakeCleanup([&] {
    service.CloseReplication();  // also lets go of calls waiting for the set-up
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    shm = {};
    rollback.set_checkpointer(nullptr);
    checkpointer.reset();
    core.set_metrics(nullptr);
  });
  // Back in a job of replicated shards: nothing to resume (its shares are copied from their
  // leaders); it writes the checkpoints of the shares it comes to lead.
  const bool backup = (*session)->joins_as_backup();
  if (!checkpoints.resume.empty() && !backup) {
    absl::StatusOr<std::vector<int>> shares = StartingShares(session->get(), rank);
    absl::Status s = shares.status();
    if (s.ok()) s = rollback.Resume(checkpoints.resume, *shares);
    if (!s.ok()) {
      std::cerr << s.message() << "\n";
      (*session)->Leave(s);
      return 1;
    }
  }
  if (checkpoints.checkpoint_every > 0) {
    checkpointer = std::make_unique<cohort::ShardCheckpointer>(
        cohort::ShardCheckpointerOptions{checkpoint_dir, checkpoints.checkpoint_keep, rank,
                                         (*session)->num_shards(),
                                         [&rollback] { rollback.ClearUndoneSteps(); }},
        &metrics, &std::cout);
    core.set_checkpoints(checkpoints.checkpoint_every, checkpointer.get());
    rollback.set_checkpointer(checkpointer.get());
  }
  set_up.Notify();
  if (backup) {
    absl::StatusOr<cohort::ShardsView> view = (*session)->WaitForShards(absl::Minutes(1));
    absl::StatusOr<std::vector<int>> copied =
        view.ok() ? absl::StatusOr<std::vector<int>>(std::vector<int>()) : view.status();
    if (view.ok()) {
      copied = cohort::CopyShares(
          *view, rank, service,
          [&security](const std::string& address) {
            return cohort::v1::Shard::NewStub(cohort::MakeChannel(address, *security));
          },
          &std::cout);
    }
    if (!copied.ok()) {
      std::cerr << "shard " << rank << ": error: " << copied.status().message() << "\n";
      (*session)->Leave(copied.status());
      return 1;
    }
    (*session)->SetCopiesHeld(*std::move(copied));  // it may lead them from now on
  }
  const int served = ServeUntilEnded(session->get(), *server, process, security);
  // Before the server goes: the backups' leaders hear it left.
  service.CloseReplication();
  shm.replicas.reset();
  if (served != 0) return 1;
  const absl::Status end = (*session)->end_status();
  std::move(stop_serving).Invoke();
  (*session)->Leave(absl::OkStatus());
  if (!end.ok()) {
    cohort::YieldToStopSignal(absl::Seconds(1));
    std::cerr << "shard " << rank << ": stopping: " << end.message() << "\n";
    return 1;
  }
  std::cout << "shard " << rank << ": job done\n";
  return 0;
}
