#ifndef COHORT_SERVICES_SHARD_REPLICATION_GRPC_REPLICA_LINK_H_
#define COHORT_SERVICES_SHARD_REPLICATION_GRPC_REPLICA_LINK_H_

#include <memory>

#include "absl/status/status.h"
#include "proto/shard.grpc.pb.h"
#include "services/shard/replication/replica_link.h"

namespace cohort {

// A link's ReplicaStream over gRPC: one Replicate call to the backup (ShardService::Replicate).
class GrpcReplicaStream final : public ReplicaStream {
 public:
  explicit GrpcReplicaStream(std::unique_ptr<v1::Shard::Stub> stub);

  bool Write(v1::ReplicaBatch& batch) override { return stream_->Write(batch); }
  bool Read(v1::ReplicaAck* ack) override { return stream_->Read(ack); }
  absl::Status Finish() override;
  void Cancel() override { context_.TryCancel(); }

 private:
  const std::unique_ptr<v1::Shard::Stub> stub_;
  grpc::ClientContext context_;
  const std::unique_ptr<grpc::ClientReaderWriter<v1::ReplicaBatch, v1::ReplicaAck>> stream_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_REPLICATION_GRPC_REPLICA_LINK_H_
