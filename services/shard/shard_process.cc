#include "services/shard/shard_process.h"

#include <chrono>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/common/addresses.h"
#include "services/common/http_server.h"
#include "services/shard/replication/backup_links.h"
#include "services/shard/replication/share_copier.h"
#include "services/shard/replication/shm_backup_link.h"
#include "services/shard/shm_push_server.h"
#include "services/wire/shm_rendezvous.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

// Each shared-memory ring's bytes: gRPC's message limit, so that what a stream takes, a ring
// takes (a part of --part_bytes, 1 MiB by default, or a fusion, many times over).
constexpr size_t kShmRingBytes = kMaxMessageBytes;
// The pool a backup offers each leader of its host beside the rings, which the leader's updates
// are made in (shm_backup_link.h): 64 MiB of updates not yet acknowledged (a 100 MB model's
// half a round); beyond it updates go through the ring. Pages are taken as first written.
constexpr size_t kBackupPoolBytes = 4 * kShmRingBytes;

// status, its message said as `who`'s error.
absl::Status Error(absl::string_view who, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(who, ": error: ", status.message()));
}

// The shares a shard resumes: its own, and with replicated shards those it backs up as the
// workers place them (ShardsView::BackupOf), known once every shard has joined.
absl::StatusOr<std::vector<int>> StartingShares(MemberSession* session, int rank) {
  std::vector<int> shares = {rank};
  if (session->shard_replicas() < 2) return shares;
  ASSIGN_OR_RETURN(const ShardsView view, session->WaitForShards());
  for (int share = 0; share < static_cast<int>(view.addresses.size()); ++share) {
    if (share != rank && view.BackupOf(share) == rank) shares.push_back(share);
  }
  return shares;
}

}  // namespace

ShardProcess::ShardProcess(ShardProcessOptions options)
    : options_(std::move(options)),
      rollback_(&core_, options_.checkpoints.folder(), options_.checkpoints.checkpoint_every > 0,
                &std::cout, &std::cerr),
      replication_(&core_, &set_up_,
                   BackupLinks(options_.shared_memory, [this] { return core_.rank(); },
                               options_.session.security, &std::cout, &std::cerr),
                   &std::cerr),
      service_(&core_, &set_up_, &rollback_, &replication_) {}

absl::StatusOr<std::unique_ptr<ShardProcess>> ShardProcess::Start(ShardProcessOptions options) {
  std::unique_ptr<ShardProcess> shard(new ShardProcess(std::move(options)));
  const ShardProcessOptions& o = shard->options_;
  absl::StatusOr<RunningServer> server =
      StartServer(o.bind, o.port, {&shard->service_}, *o.session.security);
  if (!server.ok()) return Error("shard", server.status());
  shard->server_ = *std::move(server);
  shard->serving_ = true;
  // Workers on this host push through shared memory, and shards leading parts this one backs
  // up replicate through it (under the rendezvous names of the gRPC address); none where it is
  // off or another process holds a name: those come over gRPC.
  if (o.shared_memory) {
    const std::string host = IsAnyAddress(o.bind) ? "" : o.bind;
    auto pushes =
        StartShmPushServer(&shard->core_, ShardRendezvousName(host, shard->server_.port),
                           kShmRingBytes);
    auto replicas = StartShmBackupServer(&shard->replication_,
                                          BackupRendezvousName(host, shard->server_.port),
                                          kShmRingBytes, kBackupPoolBytes);
    if (pushes.ok()) {
      shard->shm_pushes_ = *std::move(pushes);
    } else {
      std::cerr << "shard: warning: no shared-memory path for this host's workers: "
                << pushes.status().message() << "\n";
    }
    if (replicas.ok()) {
      shard->shm_backups_ = *std::move(replicas);
    } else {
      std::cerr << "shard: warning: no shared-memory path for the shards of this host it backs "
                   "up: "
                << replicas.status().message() << "\n";
    }
  }
  RETURN_IF_ERROR(shard->Join());
  RETURN_IF_ERROR(shard->SetUp());
  RETURN_IF_ERROR(shard->CopyShares());
  return shard;
}

absl::Status ShardProcess::Join() {
  MemberSessionOptions session_options = options_.session;
  session_options.port = server_.port;
  absl::StatusOr<std::unique_ptr<MemberSession>> session = MemberSession::Join(session_options);
  if (!session.ok()) return Error("shard", session.status());
  session_ = *std::move(session);
  leaving_ = std::make_unique<LeavingOnSignal>(session_.get());
  const int rank = session_->rank();
  core_.set_rank(rank);
  process_metrics_ = std::make_unique<ProcessMetrics>(session_->job_id(), "shard", rank,
                                                      options_.session.security);
  metrics_ = std::make_unique<ShardMetrics>(*process_metrics_);
  core_.set_metrics(metrics_.get());
  rollback_.SetUp(rank, session_->num_shards(), metrics_.get());
  return absl::OkStatus();
}

absl::Status ShardProcess::SetUp() {
  const CheckpointOptions& checkpoints = options_.checkpoints;
  const int rank = core_.rank();
  // Back in a job of replicated shards: nothing to resume (its shares are copied from their
  // leaders); it writes the checkpoints of the shares it comes to lead.
  if (!checkpoints.resume.empty() && !session_->joins_as_backup()) {
    absl::StatusOr<std::vector<int>> shares = StartingShares(session_.get(), rank);
    absl::Status s = shares.status();
    if (s.ok()) s = rollback_.Resume(checkpoints.resume, *shares);
    if (!s.ok()) {
      session_->Leave(s);
      return s;
    }
  }
  if (checkpoints.checkpoint_every > 0) {
    checkpointer_ = std::make_unique<ShardCheckpointer>(
        ShardCheckpointerOptions{checkpoints.folder(), checkpoints.checkpoint_keep, rank,
                                 session_->num_shards(),
                                 [this] { rollback_.ClearUndoneSteps(); }},
        metrics_.get(), &std::cout);
    core_.set_checkpoints(checkpoints.checkpoint_every, checkpointer_.get());
    rollback_.set_checkpointer(checkpointer_.get());
  }
  set_up_.Done();
  return absl::OkStatus();
}

absl::Status ShardProcess::CopyShares() {
  if (!session_->joins_as_backup()) return absl::OkStatus();
  const int rank = core_.rank();
  absl::StatusOr<ShardsView> view = session_->WaitForShards(absl::Minutes(1));
  absl::StatusOr<std::vector<int>> copied =
      view.ok() ? absl::StatusOr<std::vector<int>>(std::vector<int>()) : view.status();
  if (view.ok()) {
    copied = cohort::CopyShares(
        *view, rank, replication_,
        [security = options_.session.security](const std::string& address) {
          return v1::Shard::NewStub(MakeChannel(address, *security));
        },
        &std::cout);
  }
  if (!copied.ok()) {
    session_->Leave(copied.status());
    return Error(absl::StrCat("shard ", rank), copied.status());
  }
  session_->SetCopiesHeld(*std::move(copied));  // it may lead them from now on
  return absl::OkStatus();
}

absl::Status ShardProcess::ServeUntilEnded() {
  const int rank = core_.rank();
  auto http = ServeMetrics(options_.bind, options_.metrics_port, options_.metrics_port_file,
                           {process_metrics_->Route()}, options_.session.security);
  if (!http.ok()) return Error(absl::StrCat("shard ", rank), http.status());
  std::cout << absl::StrFormat(
                   "shard %d of job %s listening on %s:%d, metrics on %s://%s:%d/metrics\n",
                   rank, session_->job_id(), options_.bind, server_.port, (*http)->scheme(),
                   options_.bind, (*http)->port())
            << std::flush;
  session_->WaitUntilEnded(absl::InfiniteDuration());
  const absl::Status end = session_->end_status();
  StopServing();
  session_->Leave(absl::OkStatus());
  if (end.ok()) return absl::OkStatus();
  YieldToStopSignal(absl::Seconds(1));
  return absl::Status(end.code(), absl::StrCat("shard ", rank, ": stopping: ", end.message()));
}

void ShardProcess::StopServing() {
  set_up_.Leave();  // calls still waiting for the set-up end
  // Before the server goes: the backups' leaders hear this shard left.
  replication_.Close();
  shm_backups_.reset();
  if (serving_) {
    server_.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    serving_ = false;
  }
  shm_pushes_.reset();
  rollback_.set_checkpointer(nullptr);
  checkpointer_.reset();
  core_.set_metrics(nullptr);
}

ShardProcess::~ShardProcess() { StopServing(); }

}  // namespace cohort
