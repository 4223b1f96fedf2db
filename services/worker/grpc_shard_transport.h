#ifndef COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_
#define COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "services/common/transport_security.h"
#include "services/worker/shard_transport.h"

namespace cohort {

// The worker's data path over gRPC: one PushPull stream per shard (parts as raw
// v1::PartBatch byte buffers, pushes smaller than fusion_bytes fused into messages of at most
// that, answers parsed in place), and the Init and Pull calls. shard_addresses: host:port by
// shard rank; security: how the shards are dialled.
std::unique_ptr<ShardTransport> MakeGrpcShardTransport(
    std::vector<std::string> shard_addresses, std::shared_ptr<const TransportSecurity> security,
    int64_t fusion_bytes);

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_
