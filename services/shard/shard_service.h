#ifndef COHORT_SERVICES_SHARD_SHARD_SERVICE_H_
#define COHORT_SERVICES_SHARD_SHARD_SERVICE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "proto/shard.grpc.pb.h"
#include "services/shard/replica_link.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_rollback.h"

namespace cohort {

// The Shard gRPC service over a ShardCore: unpacks parts, checks their headers, and answers on
// the pushing worker's own stream. PushPull is the bulk path: parts are read from the
// transport's slices and answered without copying (as raw v1::Part bytes, so any protobuf
// client can speak to it). A refused push ends that worker's stream with the reason, which
// the shard also logs. A worker that pushes faster than it reads its answers is held back: past
// 64 MiB of answers queued for it, its stream is not read until they drain. The core must
// outlive the service. It takes the updates of the parts it backs up from its leaders' Replicate
// streams, and from their shared-memory rings (ShmReplicaServer) as a ReplicaReceiver.
class ShardService final : public v1::Shard::WithRawCallbackMethod_PushPull<v1::Shard::Service>,
                           public ReplicaReceiver {
 public:
  // set_up, when given, is notified once the core is set up (its rank known, its checkpoint
  // loaded): rank 0's Init and RollBack, which may come as soon as every member has joined,
  // wait for it. rollback answers RollBack and ListCheckpoints (it outlives the service); null:
  // the shard keeps no checkpoints, and RollBack is refused.
  // make_link: replicated shards: the link to the shard at an address that backs up the parts
  // this one leads (a config naming a backup is refused without it).
  using ReplicaLinkFactory =
      std::function<std::unique_ptr<ReplicaLink>(const std::string& address)>;
  explicit ShardService(ShardCore* core, absl::Notification* set_up = nullptr,
                        ShardRollback* rollback = nullptr, ReplicaLinkFactory make_link = nullptr);

  grpc::Status Init(grpc::ServerContext* context, grpc::ServerReader<v1::InitMessage>* reader,
                    v1::InitReply* reply) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PushPull(
      grpc::CallbackServerContext* context) override;
  grpc::Status Pull(grpc::ServerContext* context, const v1::PullRequest* request,
                    grpc::ServerWriter<v1::Part>* writer) override;
  // ShardRollback::RollBack and ShardRollback::Checkpoints.
  grpc::Status RollBack(grpc::ServerContext* context, const v1::RollBackRequest* request,
                        v1::RollBackReply* reply) override;
  grpc::Status ListCheckpoints(grpc::ServerContext* context,
                               const v1::ListCheckpointsRequest* request,
                               v1::ListCheckpointsReply* reply) override;
  // The updates of the parts this shard backs up, from the shard leading them
  // (ShardCore::ApplyReplica), each acknowledged once taken.
  grpc::Status Replicate(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ReplicaAck, v1::ReplicaBatch>* stream) override;

  // A shard that came back into the job asks for a copy of a share this one leads, and backs
  // it up from then on (ShardCore::AddBackup); answered once the copies are held there.
  grpc::Status Back(grpc::ServerContext* context, const v1::BackRequest* request,
                    v1::BackReply* reply) override;

  // ReplicaReceiver: what either way of replicating brings (ShardCore::ApplyReplica).
  absl::Status OpenReplicas() override ABSL_LOCKS_EXCLUDED(link_mu_);
  absl::Status TakeReplicas(const v1::ReplicaBatch& batch,
                            absl::Span<const absl::Span<const char>> values,
                            absl::string_view from) override ABSL_LOCKS_EXCLUDED(link_mu_);

  // The job is over: the links to the backups end, and so do the Replicate streams of the
  // shards this one backs up, cancelled (which tells their leaders it left: they say nothing;
  // the shared-memory ones end as their server goes). Later streams are refused, and calls
  // still waiting for the shard to be set up end.
  void CloseReplication();
  // How many parts of the share (a shard rank's part of the model) this shard holds.
  int PartsOfShare(int share) const;

 private:
  ShardCore* const core_;
  absl::Notification* const set_up_;
  // OK once the core is set up (or at once without set_up_); Unavailable after 5 minutes;
  // Cancelled once CloseReplication was called.
  grpc::Status WaitForSetUp(absl::string_view call) const ABSL_LOCKS_EXCLUDED(link_mu_);

  std::unique_ptr<ShardRollback> no_checkpoints_;  // without a rollback given
  ShardRollback* const rollback_;
  const ReplicaLinkFactory make_link_;
  // The job's settings from a leader's first copy, for a shard rank 0 never initialised.
  absl::Status ConfigureFromCopy(const v1::InitMessage::Config& config)
      ABSL_LOCKS_EXCLUDED(link_mu_);
  // One update, or copy, into the core; values: its F32 bytes.
  absl::Status TakeReplica(const v1::ReplicaUpdate& u, absl::Span<const char> values)
      ABSL_LOCKS_EXCLUDED(link_mu_);

  mutable absl::Mutex link_mu_;
  // The Replicate streams being served, until CloseReplication cancels them.
  absl::flat_hash_set<grpc::ServerContext*> replicating_ ABSL_GUARDED_BY(link_mu_);
  bool leaving_ ABSL_GUARDED_BY(link_mu_) = false;
  // To the backups of the parts this shard leads (Init's, then one a Back), until
  // CloseReplication.
  std::vector<std::unique_ptr<ReplicaLink>> links_ ABSL_GUARDED_BY(link_mu_);
  // The parts held, by share: what a Back copies.
  absl::flat_hash_map<int, absl::flat_hash_set<PartId>> shares_ ABSL_GUARDED_BY(link_mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_SERVICE_H_
