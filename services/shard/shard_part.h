#ifndef COHORT_SERVICES_SHARD_SHARD_PART_H_
#define COHORT_SERVICES_SHARD_SHARD_PART_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "services/shard/update_buffer.h"
#include "services/wire/byte_chunks.h"
#include "services/wire/part_id.h"
#include "services/wire/pin_count.h"
#include "services/wire/shard_config.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer.h"

namespace cohort {

// Where a shard sends a part's new value: one per worker stream. Send may block (flow
// control); it must not call back into the ShardCore.
class PartSink {
 public:
  virtual ~PartSink() = default;
  // value: the part's elements at `version` (the number of updates applied so far). The sink
  // may keep reading value after it returns, holding pin (PinCount::Pin) until done: the core
  // changes value only when every pin is released (a later update works on a copy meanwhile).
  virtual void Send(PartId id, int64_t version, absl::Span<const float> value, PinCount* pin) = 0;
};

// A part's whole state, for a shard that becomes its backup while training goes on (it came
// back into the job after a death): what its updates build on.
struct PartCopy {
  int share = -1;  // whose share of the model the part is (the partition map's shard)
  const ShardConfig* config = nullptr;  // the leader's settings (sent with a link's first copy)
  OptimizerState optimizer;             // none for an auxiliary part
  // By rank, the version of the latest push the value holds (-1: none): a worker's push sent
  // again to the backup once it leads is answered, not applied twice.
  std::vector<int64_t> pushed_on_by_rank;
  // dist_async auxiliary parts: each rank's latest push, whose mean the value is.
  std::vector<std::vector<float>> latest_pushes;
};

// One update of a part as the shard leading it made it, for the part's backup on another shard
// to make the same (chain replication): the backup runs its own copy of the update rule on the
// same input, block by block as the leader did, and so stays bitwise equal to it, optimizer
// state included.
struct LeaderUpdate {
  PartId id;
  int64_t version = 0;  // the part's version after the update
  float lr = 0;         // the rate the leader's optimizer ran at
  // An optimizer part: the update its optimizer ran on (dist_sync: the version's W pushes
  // summed in rank order, times 1/W; dist_async: the push times 1/W). An auxiliary part: its
  // new value (dist_sync), or the push its mean now holds (dist_async).
  absl::Span<const float> values;
  // Whose pushes the update holds: rank's (dist_async), or every worker's (-1, dist_sync); the
  // version they were computed on.
  int rank = -1;
  int64_t pushed_on = 0;
  // Not null: no update but the whole part (values is its value at `version`).
  const PartCopy* copy = nullptr;
  // Not null: values are all of this buffer, which the link may take instead of copying them
  // (leaving it empty; the next update's comes from BackupLink::Spare).
  UpdateBuffer* buffer = nullptr;
};

// Where a part's updates go to its backup (a stream to another shard; a fake in tests).
class BackupLink {
 public:
  virtual ~BackupLink() = default;
  // Sends the update (its bytes valid only during the call) on its way. done runs exactly
  // once, never inside Forward and before the core goes away: when the backup holds the
  // update, or when the link gave up on it (the backup is gone: the part goes on without).
  // One part's updates are forwarded in order, under its lock.
  virtual void Forward(const LeaderUpdate& update, std::function<void()> done) = 0;
  // Whether the link gave up (every later update is given up at once).
  virtual bool broken() const = 0;
  // A buffer of `bytes` bytes for an update to be made in: memory the backup reads in place
  // where the link has such, or one of those the link took and is done with, so that an
  // update costs neither a copy, an allocation nor fresh pages.
  virtual UpdateBuffer Spare(size_t bytes) { return UpdateBuffer(bytes); }
};

// A part's value and the count of replies still reading it (dist_sync sends without copying).
struct PinnedValue {
  std::vector<float> data;
  PinCount readers;
};

// What pushes are judged and applied by; replaced whole when an elastic job's workers change.
struct PartSettings {
  ShardConfig config;
  LrSchedule schedule;
};

// One part a shard holds, and what is done to it under its lock: its value, version and
// optimizer state, the pushes of the version in progress, the update rule's arithmetic (the
// rank-order sum, the optimizer block by block, an auxiliary part's mean), its answers, and
// with replication its backup's link and the answers that wait for it. The shard (ShardCore)
// owns the table of parts, judges pushes, counts them and decides when a part checkpoints.
struct ShardPart {
  // Floats per block of a push applied in place (16 KiB: stays in cache).
  static constexpr size_t kBlockFloats = 4096;

  absl::Mutex mu;
  PartId id;  // set once
  std::shared_ptr<const PartSettings> settings ABSL_GUARDED_BY(mu);
  int share = 0;  // the shard rank whose share of the model the part is; set once
  // Whether this shard leads the part (a backup's leads from the first worker push it takes):
  // only the leader gives its checkpoints.
  bool leads ABSL_GUARDED_BY(mu) = false;
  std::unique_ptr<PinnedValue> value ABSL_GUARDED_BY(mu);
  // Earlier values that replies still read; freed once they are done.
  std::vector<std::unique_ptr<PinnedValue>> retired ABSL_GUARDED_BY(mu);
  int64_t version ABSL_GUARDED_BY(mu) = 0;
  // Null for an auxiliary part: its value is the mean of the workers' pushes.
  std::unique_ptr<Optimizer> optimizer ABSL_GUARDED_BY(mu);
  // dist_sync: per rank, the pushes of the current version that came before the last one
  // (the last is applied straight from its bytes; an auxiliary part's too goes to its slot),
  // and who waits for the new value. An auxiliary part in dist_async: each rank's latest push.
  std::vector<std::vector<float>> slots ABSL_GUARDED_BY(mu);
  std::vector<char> pushed ABSL_GUARDED_BY(mu);        // by rank, for the current version
  std::vector<PartSink*> waiting ABSL_GUARDED_BY(mu);  // by rank; null: nobody to answer
  int arrived ABSL_GUARDED_BY(mu) = 0;
  float pushed_lr ABSL_GUARDED_BY(mu) = -1;  // the current version's pushes' (PartHeader::lr)
  // Replication: the backup the part's updates go to (null: none); answers waiting until it
  // holds the update of their version (null sink: its stream ended); the update forwarded.
  BackupLink* backup ABSL_GUARDED_BY(mu) = nullptr;
  struct HeldAnswer {
    int64_t version;
    PartSink* sink;
  };
  std::vector<HeldAnswer> held ABSL_GUARDED_BY(mu);
  UpdateBuffer forwarded ABSL_GUARDED_BY(mu);  // F32, 16-byte aligned
  // The newest version the backup is known to hold (its acknowledgement, or the same Init):
  // an answer of a version it holds goes at once.
  int64_t backed_up_version ABSL_GUARDED_BY(mu) = -1;
  // By rank, the version of its latest push that an update taken from the leader held (-1:
  // none, or the rank has pushed to this shard since); empty until the first such update.
  std::vector<int64_t> replicated_pushes ABSL_GUARDED_BY(mu);
  // dist_async: by rank, the version its latest push applied here was computed on (-1:
  // none), for a copy's PartCopy::pushed_on_by_rank.
  std::vector<int64_t> async_pushed_on ABSL_GUARDED_BY(mu);

  // The value, free to change in place. Replies normally let go of a value long before its
  // next update (every worker has received them); if some still read it, they keep the old
  // buffer and the part goes on with a copy. Never blocks: updates run on gRPC's threads.
  std::vector<float>& WritableValue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // No push of the current version has come (and nobody waits for one).
  void ResetPushes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // One optimizer update of the value, block by block as it reads the push: dist_sync
  // reduces it with the other ranks' slots in rank order and scales by 1/W; dist_async scales
  // it by 1/W. With a backup, the update the optimizer ran on is kept in `forwarded`.
  void ApplyPush(ByteChunks grad, int rank, float lr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // An auxiliary part's update: grad goes to rank's slot and the value becomes the slots'
  // mean, summed in rank order and scaled by 1/W (as the replicas of one process average
  // theirs).
  void AverageIntoValue(ByteChunks grad, int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The part's state at its version, for a checkpoint of `step`.
  PartCheckpoint Checkpoint() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The saved state into the part (its value of the same size; its optimizer fresh). where:
  // how a refusal names the part and the checkpoint.
  absl::Status Restore(const PartCheckpoint& saved, absl::string_view where)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Replication. The answer of the current version to reply_to: at once, or, with a backup,
  // held until the backup has the update that made it.
  void Answer(PartSink* reply_to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // With a backup: the update that made the current version, forwarded; its held answers go
  // once the backup has it. rank: dist_async's pusher (-1: dist_sync); pushed_on: the version
  // the pushes were computed on.
  void Forward(float lr, int rank, int64_t pushed_on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The backup holds version `version` (or the link gave up on it): the held answers of it
  // and before go, with the current value.
  void SendHeldAnswers(int64_t version) ABSL_LOCKS_EXCLUDED(mu);
  // A push an update taken from the leader held already: answered at once with the current
  // value (true), not applied again. A push from a rank applied here clears its mark.
  bool AnsweredAsReplicated(const PartHeader& header, PartSink* reply_to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The part as a copy for a new backup.
  PartCopy CopyOf(int share) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The backup takes the leader's copy (update.copy) whole.
  absl::Status TakeCopy(const LeaderUpdate& update, absl::string_view where)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The backup makes the leader's update (the next version, or refused naming both).
  absl::Status TakeUpdate(const LeaderUpdate& update, absl::FunctionRef<std::string()> where)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Forgets every waiting reply to sink (its stream ended).
  void Detach(PartSink* sink) ABSL_LOCKS_EXCLUDED(mu);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_PART_H_
