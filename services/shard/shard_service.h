#ifndef COHORT_SERVICES_SHARD_SHARD_SERVICE_H_
#define COHORT_SERVICES_SHARD_SHARD_SERVICE_H_

#include <memory>

#include "proto/shard.grpc.pb.h"
#include "services/shard/replication/shard_replication.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_rollback.h"
#include "services/shard/shard_set_up.h"

namespace cohort {

// The Shard gRPC service over a ShardCore: unpacks parts, checks their headers, and answers on
// the pushing worker's own stream. PushPull is the bulk path: parts are read from the
// transport's slices and answered without copying (as raw v1::Part bytes, so any protobuf
// client can speak to it). A refused push ends that worker's stream with the reason, which
// the shard also logs. A worker that pushes faster than it reads its answers is held back: past
// 64 MiB of answers queued for it, its stream is not read until they drain. Replication's calls
// (Replicate, CopyShare and Init's backup) go to a ShardReplication, roll backs to a
// ShardRollback: the service only converts. The core and what is handed in outlive the service.
class ShardService final : public v1::Shard::WithRawCallbackMethod_PushPull<v1::Shard::Service> {
 public:
  // set_up: rank 0's Init and RollBack, which may come as soon as every member has joined,
  // wait for it (null: the shard is set up already). rollback answers RollBack and
  // ListCheckpoints (null: the shard keeps no checkpoints, and RollBack is refused).
  // replication (null: one without a way to reach a backup, which may still be one).
  explicit ShardService(ShardCore* core, const ShardSetUp* set_up = nullptr,
                        ShardRollback* rollback = nullptr,
                        ShardReplication* replication = nullptr);

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
  // ShardReplication::ServeStream and TakeUpdates: each batch acknowledged once taken.
  grpc::Status Replicate(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::BackupAck, v1::LeaderUpdateBatch>* stream) override;
  // ShardReplication::CopyShareTo.
  grpc::Status CopyShare(grpc::ServerContext* context, const v1::CopyShareRequest* request,
                         v1::CopyShareReply* reply) override;

 private:
  ShardCore* const core_;
  // Without a set-up, rollback or replication handed in: the service's own.
  const std::unique_ptr<ShardSetUp> set_up_already_;
  const std::unique_ptr<ShardRollback> no_checkpoints_;
  const std::unique_ptr<ShardReplication> no_link_;
  const ShardSetUp* const set_up_;
  ShardRollback* const rollback_;
  ShardReplication* const replication_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_SERVICE_H_
