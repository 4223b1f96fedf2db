#ifndef COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_
#define COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "services/common/transport_security.h"
#include "services/worker/shard_transport.h"

namespace cohort {

// The worker's data path over gRPC: one PushPull stream per shard (parts as raw v1::Part byte
// buffers, answers parsed in place), and the Init and Pull calls. shard_addresses: host:port by
// shard rank; security: how the shards are dialled.
std::unique_ptr<ShardTransport> MakeGrpcShardTransport(
    std::vector<std::string> shard_addresses, std::shared_ptr<const TransportSecurity> security);

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_
