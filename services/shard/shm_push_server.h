#ifndef COHORT_SERVICES_SHARD_SHM_PUSH_SERVER_H_
#define COHORT_SERVICES_SHARD_SHM_PUSH_SERVER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/shard/shard_core.h"
#include "services/shard/shm_session_server.h"

namespace cohort {

// The bulk path for workers on the shard's own host: a worker dials the shard's rendezvous
// name (ShardRendezvousName) and pushes through a shared-memory ring instead of its gRPC stream;
// answers come back on a second ring. The same checks, answers and back-pressure as the gRPC
// stream (PushHandler; past 64 MiB of answers queued for a worker its pushes wait), without
// gRPC's threads: one thread reads a worker's pushes and one writes its answers. Init, Pull
// and the control calls stay on gRPC. The core must outlive the server.
// ring_bytes: each ring's capacity, at least the largest message either side sends.
absl::StatusOr<std::unique_ptr<ShmSessionServer>> StartShmPushServer(ShardCore* core,
                                                                     const std::string& name,
                                                                     size_t ring_bytes);

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHM_PUSH_SERVER_H_
