#ifndef COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_
#define COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "services/common/transport_security.h"
#include "services/worker/shard_transport.h"

namespace cohort {

// The worker's data path over gRPC: one PushPull stream per shard (parts as raw
// v1::PartBatch byte buffers, answers parsed in place), and the Init and Pull calls.
// shard_addresses: host:port by shard rank; security: how the shards are dialled. Pushes
// smaller than fusion_bytes are fused into messages of at most that: those queued while a
// write is in flight, and, with fusion_wait, those that came within fusion_wait of the first
// one queued on an idle stream (or before a Flush). With shared_memory, a shard on this host
// (its address one of this network namespace's) that offers shared memory at that address
// (ShardRendezvousName) gets the pushes through a ring instead of its stream, and answers on
// another.
std::unique_ptr<ShardTransport> MakeGrpcShardTransport(
    std::vector<std::string> shard_addresses, std::shared_ptr<const TransportSecurity> security,
    int64_t fusion_bytes, absl::Duration fusion_wait, bool shared_memory);

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_GRPC_SHARD_TRANSPORT_H_
