#ifndef COHORT_SERVICES_SHARD_SHARD_CORE_H_
#define COHORT_SERVICES_SHARD_SHARD_CORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "services/wire/part_id.h"
#include "services/wire/shard_config.h"
#include "services/shard/shard_metrics.h"
#include "services/shard/shard_part.h"

namespace cohort {

// Where a shard's parts go at checkpoint steps (shard_checkpointer.h writes them).
class CheckpointSink {
 public:
  virtual ~CheckpointSink() = default;
  // When the shard is configured (and at each regeneration): the job's settings.
  virtual void Configured(const ShardConfig& config) = 0;
  // The shard holds one more part of `share` (the shard rank whose share of the model it is):
  // a checkpoint of that share holds every one of them.
  virtual void Holds(int share) = 0;
  // One part's state at checkpoint step `step`, from the shard leading it (a backup gives
  // none: the leader writes the share). Called under the part's lock, on the thread that
  // updated it: it must only keep the part, never wait for a write.
  virtual void Add(int64_t step, int share, PartCheckpoint part) = 0;
  // The parts went back to `step` (ShardCore::RollBack): steps after it that are not written
  // yet are forgotten (their parts come again).
  virtual void RolledBack(int64_t step) = 0;
};

// A parameter shard without gRPC: the parts it holds, their optimizer state and the update
// rule (Contracts, "Gradient arithmetic"). dist_sync: a part's version-v update waits for one
// push per worker, sums them in rank order 0…W−1, scales by 1/W, runs the optimizer once with
// the schedule's rate at step v, and sends version v+1 to every worker that pushed.
// dist_async: each push is scaled by 1/W and applied at once, with the schedule's rate at step
// ⌊version / W⌋ (W pushes make a step); the new value goes back to the pusher. An auxiliary
// key (ShardConfig::auxiliary_keys) has no optimizer: its value becomes the mean of the
// workers' pushes (dist_sync: of the version's W pushes; dist_async: of each worker's latest).
// A refused push (wrong size, NaN or infinite values, unknown part, stale or future version, a
// second push of a version) leaves the part untouched. Thread-safe: pushes of different parts
// run in parallel (one lock per part).
//
// Checkpoints: with set_checkpoints, every part copies its value and optimizer state to the
// sink when it reaches a checkpoint step (dist_sync: version = step, the same for every part,
// so the shards agree on it without a message; dist_async: W pushes make a step). With
// ResumeFrom, the parts rank 0 initialises take the checkpoint's values, versions and
// optimizer state instead of the initial values (the workers then pull them); without, the
// initial values are checkpoint step 0 (what an elastic job goes back to before its first
// checkpoint).
class ShardCore {
 public:
  // What a configuration may ask for (a hostile or broken one is refused, not allocated).
  static constexpr int kMaxWorkers = 1 << 16;
  static constexpr int kMaxParts = 1 << 24;

  explicit ShardCore(int shard_rank = 0) : shard_rank_(shard_rank) {}
  // The rank messages name, once the scheduler has assigned it (before any request).
  void set_rank(int shard_rank) { shard_rank_ = shard_rank; }
  int rank() const { return shard_rank_.load(); }
  // Where updates and refusals are counted from now on (null: nowhere). Outlives the core.
  void set_metrics(ShardMetrics* metrics) { metrics_ = metrics; }
  ShardMetrics* metrics() const { return metrics_.load(); }
  // Before Configure: a checkpoint every `every_steps` steps (0: none) goes to sink (outlives
  // the core).
  void set_checkpoints(int64_t every_steps, CheckpointSink* sink) {
    checkpoint_every_ = every_steps;
    checkpoints_ = sink;
  }
  // Before Configure: the parts start from this checkpoint. Configure refuses a job whose
  // partition map or mode differ from the checkpoint's.
  void ResumeFrom(ShardCheckpoint checkpoint) {
    absl::MutexLock lock(&mu_);
    resume_ = std::move(checkpoint);
  }

  // Once, before any push: the update rule and the number of parts that will be added.
  absl::Status Configure(const ShardConfig& config);
  // A part's initial value (part ids unique), of `share` (-1: this shard's own); `leads`:
  // false for a part this shard backs up for the shard leading it (it leads it from the first
  // worker push it takes, once that shard died).
  absl::Status AddPart(PartId id, absl::Span<const float> value, int share = -1,
                       bool leads = true);
  // True once every announced part has been added.
  bool ready() const;

  // grad: the bytes of the part's gradient in header.encoding (2-bit and 16-bit pushes are
  // decoded to F32 first), computed by header.rank on header.version in membership
  // header.generation. reply_to receives the new value (it must stay valid until the update it
  // waits for has been sent, or until Detach).
  absl::Status Push(const PartHeader& header, ByteChunks grad, PartSink* reply_to);
  // An F32 push.
  absl::Status Push(int rank, PartId id, int64_t version, absl::Span<const float> grad,
                    PartSink* reply_to, int64_t generation = 0);
  // After another shard of the job died and came back from a checkpoint, or an elastic job's
  // workers changed: every part takes this checkpoint's value, version and optimizer state (it
  // must hold every part), the pushes waiting for a version are dropped, and the sink forgets
  // steps after the checkpoint's. With `next`, the parts go on under its generation, number
  // of workers and update rule, from its step (versions renumbered; the optimizer state kept).
  // The workers have closed their streams; they pull the values and push from that step on.
  absl::Status RollBack(ShardCheckpoint checkpoint,
                        const std::optional<Regeneration>& next = std::nullopt);
  // Gives the checkpoint sink every part as it is now (after a regeneration: its first step).
  void CheckpointNow();
  // The step the parts started from: 0, or that of the checkpoint resumed or rolled back to.
  int64_t start_step() const;
  // Whether the parts started from a checkpoint (ResumeFrom) rather than the initial values.
  bool resumed() const;
  // The shares (shard ranks' shares of the model) the shard holds parts of: its own first,
  // then those it backs up or took over, in order. Its own alone before it holds any part.
  std::vector<int> Shares() const;
  // The settings pushes are judged by (the latest generation's); none before Configure.
  std::optional<ShardConfig> config() const;
  // How many times the shard rolled back: a stream opened before the last one carries pushes
  // of a past that was undone (the service refuses them).
  int64_t rollbacks() const { return rollbacks_.load(); }
  // Copies the part's current value into out (resized) and returns its version.
  absl::StatusOr<int64_t> Read(PartId id, std::vector<float>* out);

  // Replicated shards (shard_core_replication.cc). The shard leads the part, and from now on
  // every update of it goes to its backup through link; the workers' answers wait until the
  // backup holds the update, so that no answered step is lost with this shard. Null: the part
  // goes on without a backup (answers held for an update in flight go when its done runs).
  absl::Status SetBackup(PartId id, BackupLink* link);
  // The shard leads these parts of a share, and a shard that came back backs them up from now
  // on while training goes on: each part's copy (PartCopy) goes through link, then its updates
  // (a backup it had before is replaced). copied runs once link's done ran for every copy.
  absl::Status AddBackup(absl::Span<const PartId> parts, int share, BackupLink* link,
                         std::function<void()> copied);
  // Every part goes on without a backup (the job ended).
  void DropBackups();
  // The parts still forwarding to link (one that gave up: the same as none) go on without a
  // backup, so that the link may go.
  void DropBackupLink(const BackupLink* link);
  // The shard backs the part up: it takes the leader's update (the next version, or refused
  // naming both versions). Once it leads the part itself (its leader died), a worker's push
  // that an update taken so held already is answered with the current value, not applied
  // again: the leader may have died between its backup's update and its answer.
  // A copy (update.copy) sets the part up whole, the shard configured by its settings first
  // if rank 0 never initialised it (it came back into the job).
  absl::Status ApplyLeaderUpdate(const LeaderUpdate& update);
  // Forgets every waiting reply to sink (its stream ended).
  void Detach(PartSink* sink);

 private:
  absl::StatusOr<ShardPart*> FindPart(PartId id, absl::string_view what) const;
  // Push's steps: who and what a push's message names; its checks (generation, rank, size);
  // a compressed push decoded into out (the part's size); dist_async's update at once, and
  // dist_sync's wait for the version's W pushes, the last of which makes the update.
  std::string PushWhere(const PartHeader& header) const;
  absl::Status CheckPush(const PartHeader& header, ByteChunks grad, const ShardPart& p) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu);
  absl::Status DecodePush(const PartHeader& header, ByteChunks grad, absl::Span<float> out) const;
  absl::Status PushAsync(const PartHeader& header, ByteChunks grad, ShardPart* p,
                         PartSink* reply_to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu);
  absl::Status PushSync(const PartHeader& header, ByteChunks grad, ShardPart* p,
                        PartSink* reply_to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu);
  // The part's update from the push grad of `rank` (F32): an optimizer part's, timed, or an
  // auxiliary part's mean.
  void Update(ShardPart* p, ByteChunks grad, int rank, float lr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu);
  // Refuses a checkpoint of another partition, mode or part count than config's.
  absl::Status CheckCheckpointFits(const ShardCheckpoint& c, const ShardConfig& config) const;
  // Refuses to resume a checkpoint whose steps split the data otherwise: another number of
  // workers or of steps an epoch (another batch).
  absl::Status CheckStepsMeanTheSame(const ShardCheckpoint& c, const ShardConfig& config) const;
  // resume_'s state of part id into p (its value of the same size, its optimizer fresh).
  absl::Status Restore(PartId id, ShardPart* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, p->mu);
  // Gives the sink a copy of the part when its version is a checkpoint step and this shard
  // leads it.
  void MaybeCheckpoint(ShardPart* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu);
  // Gives the sink a copy of the part at its step.
  void AddCheckpoint(ShardPart* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu);
  // Pushes that make a step: dist_async, W.
  static int64_t PushesPerStep(const ShardConfig& config) {
    return config.mode == KVStoreMode::kDistAsync ? config.num_workers : 1;
  }
  // Refuses what no part could be set up for (before anything is sized by it).
  absl::Status CheckConfig(const ShardConfig& config) const;
  // A new part of `share` under the current settings, its optimizer fresh (none for an
  // auxiliary key), its value still empty; the checkpoint sink told the shard holds the share.
  std::unique_ptr<ShardPart> NewPart(PartId id, int share) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ApplyLeaderUpdate of a copy: the part, created if the shard does not hold it, takes it whole.
  absl::Status TakeCopy(const LeaderUpdate& update);
  // Counts a refused request; returns status.
  absl::Status Refuse(Rejection reason, absl::Status status) const;
  // Counts an update to `version` made of `pushes` pushes.
  void Applied(int64_t version, int pushes);

  std::atomic<int> shard_rank_;
  std::atomic<ShardMetrics*> metrics_{nullptr};
  std::atomic<int64_t> highest_version_{0};
  std::atomic<int64_t> rollbacks_{0};
  mutable absl::Mutex mu_;  // the part table; parts are never removed
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  int expected_parts_ ABSL_GUARDED_BY(mu_) = 0;
  // Configure's, or the latest regeneration's; each part holds it too.
  std::shared_ptr<const PartSettings> settings_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int64_t> auxiliary_keys_;  // written once by Configure, before any push
  int64_t checkpoint_every_ = 0;  // set before Configure
  CheckpointSink* checkpoints_ = nullptr;
  // The checkpoint the parts are restored from, until every part has been.
  std::optional<ShardCheckpoint> resume_ ABSL_GUARDED_BY(mu_);
  int64_t start_step_ ABSL_GUARDED_BY(mu_) = 0;
  bool resumed_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<PartId, const PartCheckpoint*> resume_parts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<PartId, std::unique_ptr<ShardPart>> parts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_CORE_H_
