#ifndef COHORT_SERVICES_SHARD_SHM_SESSION_SERVER_H_
#define COHORT_SERVICES_SHARD_SHM_SESSION_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/wire/shm_rendezvous.h"

namespace cohort {

// What a ShmSessionServer keeps for one process that dialled it.
class ShmSession {
 public:
  // Ends the session (if its peer has not) and waits for its threads.
  virtual ~ShmSession() = default;
  // Whether it is over and can go.
  virtual bool finished() = 0;
};

// The shard's side of a shared-memory path: a thread accepts the processes that dial `name`
// and makes a session of each channel; sessions whose peers left go when the next one comes (a
// restarted peer, a new generation); all end with the server.
class ShmSessionServer {
 public:
  using MakeSession = std::function<std::unique_ptr<ShmSession>(ShmChannel)>;
  // ring_bytes: each ring's capacity, at least the largest message either side sends;
  // pool_bytes: a region beside each channel's rings (ShmChannel::pool; 0: none). who: the
  // peers, for a failed channel's warning ("a worker"); otherwise: what such a peer does then
  // ("that worker pushes over gRPC").
  static absl::StatusOr<std::unique_ptr<ShmSessionServer>> Start(const std::string& name,
                                                                 size_t ring_bytes,
                                                                 size_t pool_bytes,
                                                                 std::string who,
                                                                 std::string otherwise,
                                                                 MakeSession make);
  // Stops accepting and ends every session.
  ~ShmSessionServer();

  // Peers that have dialled so far.
  int64_t sessions_started() {
    absl::MutexLock lock(&mu_);
    return sessions_started_;
  }

 private:
  ShmSessionServer(std::unique_ptr<ShmListener> listener, std::string who, std::string otherwise,
                   MakeSession make);
  void AcceptLoop();

  const std::unique_ptr<ShmListener> listener_;
  const std::string who_, otherwise_;
  const MakeSession make_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<ShmSession>> sessions_ ABSL_GUARDED_BY(mu_);
  int64_t sessions_started_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread accepting_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHM_SESSION_SERVER_H_
