#ifndef COHORT_SERVICES_SHARD_REPLICATION_GRPC_BACKUP_LINK_H_
#define COHORT_SERVICES_SHARD_REPLICATION_GRPC_BACKUP_LINK_H_

#include <memory>

#include "absl/status/status.h"
#include "proto/shard.grpc.pb.h"
#include "services/shard/replication/backup_link.h"

namespace cohort {

// A link's BackupStream over gRPC: one Replicate call to the backup (ShardService::Replicate).
class GrpcBackupStream final : public BackupStream {
 public:
  explicit GrpcBackupStream(std::unique_ptr<v1::Shard::Stub> stub);

  bool Write(v1::LeaderUpdateBatch& batch) override { return stream_->Write(batch); }
  bool Read(v1::BackupAck* ack) override { return stream_->Read(ack); }
  absl::Status Finish() override;
  void Cancel() override { context_.TryCancel(); }

 private:
  const std::unique_ptr<v1::Shard::Stub> stub_;
  grpc::ClientContext context_;
  const std::unique_ptr<grpc::ClientReaderWriter<v1::LeaderUpdateBatch, v1::BackupAck>> stream_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_REPLICATION_GRPC_BACKUP_LINK_H_
