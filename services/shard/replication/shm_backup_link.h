#ifndef COHORT_SERVICES_SHARD_REPLICATION_SHM_BACKUP_LINK_H_
#define COHORT_SERVICES_SHARD_REPLICATION_SHM_BACKUP_LINK_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/shard.pb.h"
#include "services/shard/replication/backup_link.h"
#include "services/shard/shm_session_server.h"
#include "services/wire/shm_region.h"
#include "services/wire/shm_rendezvous.h"

namespace cohort {

// Replication between two shards of one host through shared memory: the leader's batches go
// into one ring and the backup's acknowledgements come back on the other (a ShmChannel to the
// backup's BackupRendezvousName), instead of a Replicate stream through loopback TCP. Where the
// backup offers a pool beside the rings (ShmChannel::pool), the leader's optimizer pass writes
// each update straight into a stretch of it (BackupLink::Spare), the batch says where, and the
// stretch is the leader's again once the backup acknowledged the batch; without room there, an
// update's values are copied into the ring. The backup applies them where they lie.
//
// A batch in the ring: a 4-byte little-endian length, the v1::LeaderUpdateBatch with every update's
// `values` left empty and `ring_value_bytes` its count in the ring (or `pool_offset` and
// `pool_value_bytes` where it lies in the pool), zeros up to a 4-byte boundary, then the ring's
// values in order. An acknowledgement: a v1::BackupAck. The backup's last message may say why
// it ended the stream (ring_stream.h): Cancelled when it left a job that ended.

// Stretches of a pool two shards map, handed out in the order asked for and taken back in any
// order (a stretch is free again once every one handed out before it is); thread-safe.
class SharedUpdatePool final : public UpdatePool,
                               public std::enable_shared_from_this<SharedUpdatePool> {
 public:
  explicit SharedUpdatePool(std::shared_ptr<ShmRegion> region);
  // bytes of the pool (64-byte aligned), or nullopt when there is no room now.
  std::optional<UpdateBuffer> Take(size_t bytes);
  void GiveBack(int64_t offset) override;

 private:
  struct Stretch {
    size_t offset;
    bool free;
  };
  const std::shared_ptr<ShmRegion> region_;
  absl::Mutex mu_;
  std::deque<Stretch> taken_ ABSL_GUARDED_BY(mu_);  // in the order handed out
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;            // where the next one starts, room allowing
};

// The leader's side: a BackupStream for StreamBackupLink.
class ShmBackupStream final : public BackupStream {
 public:
  explicit ShmBackupStream(ShmChannel channel);

  bool Write(v1::LeaderUpdateBatch& batch) override;
  bool Read(v1::BackupAck* ack) override;
  absl::Status Finish() override;
  void Cancel() override;
  std::optional<UpdateBuffer> Share(size_t bytes) override;
  const UpdatePool* pool() const override { return pool_.get(); }

 private:
  // Keeps the first reason the stream ended.
  void End(const absl::Status& why);

  ShmChannel channel_;
  const std::shared_ptr<SharedUpdatePool> pool_;  // null: the backup offers none
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
absl::StatusOr<std::unique_ptr<ShmBackupStream>> DialShmBackup(const std::string& address);

// The backup's side: serves the leaders of this host that dial `name` (BackupRendezvousName),
// each batch taken by `receiver` in place and acknowledged; a refused one ends that stream
// with the reason. Once the server goes, each stream ends cancelled (the leader says nothing,
// as for ShardReplication::Close). The receiver must outlive the server.
// pool_bytes: the pool offered beside each leader's rings (0: none; values then go through the
// ring).
absl::StatusOr<std::unique_ptr<ShmSessionServer>> StartShmBackupServer(BackupIntake* receiver,
                                                                        const std::string& name,
                                                                        size_t ring_bytes,
                                                                        size_t pool_bytes);

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_REPLICATION_SHM_BACKUP_LINK_H_
