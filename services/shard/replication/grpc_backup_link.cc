#include "services/shard/replication/grpc_backup_link.h"

#include <utility>

#include "services/common/grpc_util.h"

namespace cohort {

GrpcBackupStream::GrpcBackupStream(std::unique_ptr<v1::Shard::Stub> stub)
    : stub_(std::move(stub)), stream_(stub_->Replicate(&context_)) {}

absl::Status GrpcBackupStream::Finish() { return FromGrpcStatus(stream_->Finish()); }

}  // namespace cohort
