#ifndef COHORT_SERVICES_SHARD_SHM_REPLICA_LINK_H_
#define COHORT_SERVICES_SHARD_SHM_REPLICA_LINK_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/shard.pb.h"
#include "services/shard/replica_link.h"
#include "services/shard/shm_session_server.h"
#include "services/wire/shm_rendezvous.h"

namespace cohort {

// Replication between two shards of one host through shared memory: the leader's batches go
// into one ring and the backup's acknowledgements come back on the other (a ShmChannel to the
// backup's ReplicaRendezvousName), instead of a Replicate stream through loopback TCP. The
// values are copied once, into the ring, and the backup applies them where they lie there.
//
// A batch in the ring: a 4-byte little-endian length, the v1::ReplicaBatch with every update's
// `values` left empty and `ring_value_bytes` its count, zeros up to a 4-byte boundary, then each
// update's values in order. An acknowledgement: a v1::ReplicaAck. The backup's last message may
// say why it ended the stream (ring_stream.h): Cancelled when it left a job that ended.

// The leader's side: a ReplicaStream for StreamReplicaLink.
class ShmReplicaStream final : public ReplicaStream {
 public:
  explicit ShmReplicaStream(ShmChannel channel);

  bool Write(v1::ReplicaBatch& batch) override;
  bool Read(v1::ReplicaAck* ack) override;
  absl::Status Finish() override;
  void Cancel() override;

 private:
  // Keeps the first reason the stream ended.
  void End(const absl::Status& why);

  ShmChannel channel_;
  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
  // The writer's, kept from one batch to the next.
  std::string message_;
  std::vector<std::string> values_;
  std::vector<absl::Span<const char>> pieces_;
  // The reader's.
  std::string ack_;
};

// The stream to the backup at `address` (host:port) when it serves replication through shared
// memory on this host; NotFound when it is another host's or does not.
absl::StatusOr<std::unique_ptr<ShmReplicaStream>> DialShmReplica(const std::string& address);

// The backup's side: serves the leaders of this host that dial `name` (ReplicaRendezvousName),
// each batch taken by `receiver` in place and acknowledged; a refused one ends that stream
// with the reason. Once the server goes, each stream ends cancelled (the leader says nothing,
// as for ShardService::CloseReplication). The receiver must outlive the server.
absl::StatusOr<std::unique_ptr<ShmSessionServer>> StartShmReplicaServer(ReplicaReceiver* receiver,
                                                                        const std::string& name,
                                                                        size_t ring_bytes);

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHM_REPLICA_LINK_H_
