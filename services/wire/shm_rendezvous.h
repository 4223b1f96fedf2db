#ifndef COHORT_SERVICES_WIRE_SHM_RENDEZVOUS_H_
#define COHORT_SERVICES_WIRE_SHM_RENDEZVOUS_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/wire/shm_region.h"
#include "services/wire/shm_ring.h"

namespace cohort {

// Two rings between two processes on one host, one each way, and the Unix socket that joined
// them. Both rings watch the socket, so either side's waits fail once the other process is gone.
class ShmChannel {
 public:
  // peer_pid: the other process (-1 where unknown). pool: a region both map, or null.
  ShmChannel(std::unique_ptr<ShmRing> in, std::unique_ptr<ShmRing> out, int socket,
             int peer_pid = -1, std::shared_ptr<ShmRegion> pool = nullptr);
  ~ShmChannel();
  ShmChannel(ShmChannel&& other) noexcept;
  ShmChannel& operator=(ShmChannel&&) = delete;
  ShmChannel(const ShmChannel&) = delete;

  ShmRing& in() { return *in_; }    // messages to this side
  ShmRing& out() { return *out_; }  // messages from this side
  int peer_pid() const { return peer_pid_; }
  // The region the listener offered beside the rings (ShmListener's pool_bytes), or null.
  const std::shared_ptr<ShmRegion>& pool() const { return pool_; }

 private:
  std::unique_ptr<ShmRing> in_, out_;
  int socket_;
  int peer_pid_;
  std::shared_ptr<ShmRegion> pool_;
};

// Where processes of one host meet: an abstract Unix socket (no file to clean up). Abstract
// names belong to a network namespace, so only processes that share the listener's can
// connect: a peer on another host, or in another namespace, finds nobody and keeps to the
// network.
//
// The listener makes both rings of each connection (and, with pool_bytes, a region) and passes
// their descriptors over the socket (SCM_RIGHTS); the other side attaches to them.
class ShmListener {
 public:
  // ring_bytes: each ring's capacity (a power of two, at least 4096). pool_bytes: a region of
  // that size beside the rings of each connection (0: none).
  static absl::StatusOr<std::unique_ptr<ShmListener>> Listen(const std::string& name,
                                                             size_t ring_bytes,
                                                             size_t pool_bytes = 0);
  ~ShmListener();

  // Waits for the next process to dial and returns its channel. Processes of other users are
  // turned away (their pushes would skip the job's TLS and token). Cancelled once Close was
  // called.
  absl::StatusOr<ShmChannel> Accept();
  // Wakes a waiting Accept; later ones fail at once. Thread-safe.
  void Close();

 private:
  ShmListener(std::string name, int fd, size_t ring_bytes, size_t pool_bytes);

  const std::string name_;
  const int fd_;
  const size_t ring_bytes_;
  const size_t pool_bytes_;
  std::atomic<bool> closed_{false};
};

// The rendezvous name of the shard serving gRPC at host:port, unique within a network namespace
// as abstract socket names are. host is "" for a shard listening at every address, which holds
// the port alone; one listening at a single address holds it at that address only, so another
// may hold the same port at another.
std::string ShardRendezvousName(absl::string_view host, int port);

// The rendezvous name of the replication of the shard serving gRPC at host:port (its backup's
// side of shm_backup_link.h), as ShardRendezvousName.
std::string BackupRendezvousName(absl::string_view host, int port);

// Connects to what the shard at `address` (host:port) offers on this host under `named`'s names:
// the one for its own address, then the one for every address. NotFound when the address is
// another host's or nobody listens there; Unavailable as DialShm.
absl::StatusOr<ShmChannel> DialShardOnThisHost(absl::string_view address,
                                               std::string (*named)(absl::string_view host,
                                                                    int port));

// Connects to the listener named `name` in this network namespace. NotFound when none listens
// there; Unavailable when one of another user does, or it fails (the caller then uses the
// network).
absl::StatusOr<ShmChannel> DialShm(const std::string& name);

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_SHM_RENDEZVOUS_H_
