#ifndef COHORT_SERVICES_SHARD_SHM_PUSH_SERVER_H_
#define COHORT_SERVICES_SHARD_SHM_PUSH_SERVER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/shard/shard_core.h"
#include "services/wire/shm_rendezvous.h"

namespace cohort {

class ShmPushSession;

// The bulk path for workers on the shard's own host: a worker dials the shard's rendezvous
// name (ShardRendezvousName) and pushes through a shared-memory ring instead of its gRPC stream;
// answers come back on a second ring. The same checks, answers and back-pressure as the gRPC
// stream (PushHandler; past 64 MiB of answers queued for a worker its pushes wait), without
// gRPC's threads: one thread reads a worker's pushes and one writes its answers. Init, Pull
// and the control calls stay on gRPC. The core must outlive the server.
class ShmPushServer {
 public:
  // ring_bytes: each ring's capacity, at least the largest message either side sends.
  static absl::StatusOr<std::unique_ptr<ShmPushServer>> Start(ShardCore* core,
                                                              const std::string& name,
                                                              size_t ring_bytes);
  // Stops accepting and ends every worker's session.
  ~ShmPushServer();

  // Workers that have dialled so far.
  int64_t sessions_started() {
    absl::MutexLock lock(&mu_);
    return sessions_started_;
  }

 private:
  ShmPushServer(ShardCore* core, std::unique_ptr<ShmListener> listener);
  void AcceptLoop();

  ShardCore* const core_;
  const std::unique_ptr<ShmListener> listener_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<ShmPushSession>> sessions_ ABSL_GUARDED_BY(mu_);
  int64_t sessions_started_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread accepting_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHM_PUSH_SERVER_H_
