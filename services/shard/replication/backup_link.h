#ifndef COHORT_SERVICES_SHARD_REPLICATION_BACKUP_LINK_H_
#define COHORT_SERVICES_SHARD_REPLICATION_BACKUP_LINK_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/shard.pb.h"
#include "services/shard/shard_core.h"

namespace cohort {

// How a link's batches reach the backup and its acknowledgements come back: a Replicate stream
// over gRPC (grpc_backup_link.h), or two shared-memory rings when the backup shares the host
// (shm_backup_link.h).
class BackupStream {
 public:
  virtual ~BackupStream() = default;
  // Sends one batch (the link's writing thread; its values' buffers are left in it, to be used
  // again); false once the stream failed.
  virtual bool Write(v1::LeaderUpdateBatch& batch) = 0;
  // The next acknowledgement (the link's reading thread); false once the stream ended.
  virtual bool Read(v1::BackupAck* ack) = 0;
  // Why the stream ended, once Read returned false and no Write is in flight. Cancelled: the
  // backup left a job that ended.
  virtual absl::Status Finish() = 0;
  // Ends the stream from this side: Read and Write return false soon. Any thread.
  virtual void Cancel() = 0;
  // A stretch of memory the backup reads in place, where the stream has such and room (a
  // batch then carries where the update lies, not its bytes); any thread.
  virtual std::optional<UpdateBuffer> Share(size_t bytes) { return std::nullopt; }
  // The pool Share's stretches come from (null: none).
  virtual const UpdatePool* pool() const { return nullptr; }
};

// A leader's BackupLink to the shard backing its parts up, over one BackupStream. Forward takes
// the update's buffer (or copies its values) into a message and returns; a thread of the link
// writes them in order, those waiting together as one batch (up to the data path's fusion size),
// and another runs each update's done as the backup acknowledges it. Once the stream ends, the link
// gives every update not acknowledged up (its done runs: the parts go on without a backup) and,
// unless the backup cancelled it as it left a job that ended (ShardReplication::Close), says
// why on err: the backup died, or refused an update.
class StreamBackupLink final : public BackupLink {
 public:
  // leader: how messages name this shard ("shard 0"); backup: the backup's name and address.
  StreamBackupLink(std::unique_ptr<BackupStream> stream, std::string leader,
                    std::string backup, std::ostream* err);
  // Ends the stream; every done not run yet runs before it returns.
  ~StreamBackupLink() override;

  void Forward(const LeaderUpdate& update, std::function<void()> done) override;

  // Whether the stream failed (every later update is given up at once).
  bool broken() const override;

  // A stretch the stream shares with the backup, else one of the update buffers written
  // already, of the closest size at least `bytes`.
  UpdateBuffer Spare(size_t bytes) override;

 private:
  // An update waiting for the writer, as plain fields: the writer fills its batch's messages,
  // kept from one batch to the next, from them.
  struct Queued {
    PartId id;
    int64_t version = 0;
    float lr = 0;
    int rank = -1;
    int64_t pushed_on = 0;
    std::string values;   // F32 bytes; empty for a shared update
    UpdateBuffer shared;  // where a shared update lies, until the backup has it
    // A whole part's copy: the message's copy fields (rare: built here).
    std::unique_ptr<v1::LeaderUpdate> copy;
    std::unique_ptr<v1::InitMessage::Config> config;  // for the batch it goes in
    std::function<void()> done;
  };
  // Fills m (cleared) from q, taking its values.
  static void Fill(Queued& q, v1::LeaderUpdate& m);
  struct Sent {
    std::function<void()> done;
    UpdateBuffer shared;
  };
  void WriteLoop();
  void ReadLoop();
  // How the stream ended, said unless the link is closing or the backup left.
  void Say(const absl::Status& why);
  // Runs the dones of updates sent and not acknowledged.
  void GiveUpSent();

  const std::unique_ptr<BackupStream> stream_;
  const std::string leader_;
  const std::string backup_;
  std::ostream* const err_;

  mutable absl::Mutex mu_;
  std::deque<Queued> to_send_ ABSL_GUARDED_BY(mu_);
  std::deque<Sent> sent_ ABSL_GUARDED_BY(mu_);  // not acknowledged yet
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool config_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = true;
  // Written updates' buffers by capacity, for Spare: as many as updates taken and not yet
  // written again, so at most one a part the shard leads, plus those in flight.
  std::multimap<size_t, std::string> spares_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;
  std::thread reader_;
};

// What a backup does with the batches its leaders send, whatever carried them (ShardReplication).
class BackupIntake {
 public:
  virtual ~BackupIntake() = default;
  // A leader's stream begins: waits until the shard is set up; refused once it left the job.
  virtual absl::Status OpenIntake() = 0;
  // One batch, each update taken in order; values[i]: update i's F32 bytes (its `values` field
  // is not read). A refusal is also said on stderr, naming the leader as `from`.
  virtual absl::Status TakeUpdates(const v1::LeaderUpdateBatch& batch,
                                    absl::Span<const absl::Span<const char>> values,
                                    absl::string_view from) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_REPLICATION_BACKUP_LINK_H_
