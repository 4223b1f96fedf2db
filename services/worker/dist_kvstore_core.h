#ifndef COHORT_SERVICES_WORKER_DIST_KVSTORE_CORE_H_
#define COHORT_SERVICES_WORKER_DIST_KVSTORE_CORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/membership/job_membership.h"
#include "services/wire/pin_count.h"
#include "services/wire/wire_encoding.h"
#include "services/worker/shard_transport.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/kvstore/kvstore_mode.h"
#include "trainer/kvstore/partition.h"

namespace cohort {

// Fused messages of up to 256 KiB: docs/benchmarks.md, "Small tensors", measured 64 KiB to
// 2 MiB on loopback and on a 1 Gbit/s link.
inline constexpr int64_t kDefaultFusionBytes = 256 << 10;

struct DistKVStoreOptions {
  int64_t part_bytes = 1 << 20;  // parameters are split into parts of at most this
  // Parts smaller than this are fused into messages of at most this many bytes (0: one part a
  // message); the shards fuse their answers the same way.
  int64_t fusion_bytes = kDefaultFusionBytes;
  // How gradients (and the values answering them) travel (--gradient_compression).
  GradientCompression compression;
  // A wait with no answer at all for this long fails, naming a part still missing, instead of
  // hanging: a dist_sync answer waits for the slowest worker's push, so this bounds how far
  // behind a worker may fall, not a step's time.
  absl::Duration answer_timeout = absl::Minutes(5);
};

// An elastic job's step on the shards when its workers changed, numbered for the new number
// of workers: the same epoch, at the same share of it done (steps per epoch follow 1/W).
int64_t RenumberStep(int64_t step, int64_t old_steps_per_epoch, int64_t new_steps_per_epoch);

// The worker's side of the data path without gRPC: the distributed kvstore ("dist_sync",
// "dist_async") on a job membership and a transport to the shards, both injected.
//
// Parameters live on the shards as parts (trainer/kvstore/partition.h). On the first push or
// pull every rank computes the partition map; rank 0 sends each shard its settings and its
// parts' initial values; a barrier checks that every rank computed the same map; then the
// streams open. PushPull sends every part of a key on its shard's stream straight from the
// gradient's memory; each answer is checked (a part of a key in flight, from the shard holding
// it, of its size, not answered yet, one version past the push in dist_sync or later in
// dist_async) and its bytes copied straight into the destination. Wait returns once every part
// is in and the transport has let go of the gradient. It fails, and stops every stream so that
// nothing touches the caller's tensors afterwards, with:
//  - Internal naming the shard, key, part and version when an answer is refused (unknown part,
//    another shard's part, wrong size, a duplicate, the wrong version);
//  - Unavailable naming the shard and its address when a stream ends ("did the shard die?");
//  - the membership's end status when the job ends (Aborted with the scheduler's reason);
//  - DeadlineExceeded naming a missing part and its shard when no answer at all comes for
//    answer_timeout (a lost answer).
// After a failure every push and wait fails the same way. A pull of a key with nothing in
// flight asks the shards for the current values.
//
// Calls come from one thread (KVStore's contract); answers arrive on the transport's threads.
class DistKVStoreCore : public KVStore, private AnswerReceiver {
 public:
  // mode: dist_sync or dist_async. membership outlives the store. shards: the view the
  // transport was dialled from (JobMembership::WaitForShards).
  DistKVStoreCore(KVStoreMode mode, JobMembership* membership,
                  std::unique_ptr<ShardTransport> transport, ShardsView shards,
                  const DistKVStoreOptions& options);
  ~DistKVStoreCore() override;

  absl::string_view type() const override { return KVStoreModeName(mode_); }
  // In the current membership generation (an elastic job's change renumbers the workers).
  int rank() const override { return shards_.rank; }
  int num_workers() const override { return shards_.num_workers; }
  int initial_num_workers() const override { return membership_->num_workers(); }
  void SetUpdateRuleFor(UpdateRuleFor rule) override { update_rule_ = std::move(rule); }

  absl::Status SetOptimizer(const OptimizerSpec& spec) override;
  absl::Status Init(int64_t key, const Tensor& value) override;
  absl::Status InitAuxiliary(int64_t key, const Tensor& value) override;
  absl::Status PushPull(int64_t key, const Tensor& grad, Tensor* out) override;
  absl::Status Wait(int64_t key) override;
  absl::Status Push(int64_t key, const Tensor& grad) override;
  absl::Status Pull(int64_t key, Tensor* out) override;
  absl::Status Barrier() override;
  // dist_sync: the version every part is at (Internal naming two parts that disagree: shards
  // resumed from different checkpoints); dist_async: the least part version / W.
  absl::StatusOr<int64_t> StartStep() override;
  // When the failure is a shard's stream ending Unavailable (it died) in a job whose scheduler
  // waits for dead shards (--shard_restart_grace): every worker stops pushing (a barrier) and
  // waits, up to the grace, for a shard to come back from its checkpoint (another process at
  // its rank); the streams are dialled again at the shards' addresses now; rank 0 sets up the
  // restarted shards and rolls every other back to the checkpoint they resumed from; after a
  // second barrier the streams open again and the caller pulls every key and goes on from
  // StartStep().
  // When the job's workers changed (an elastic job: the scheduler's new generation, heard on
  // the control stream or from a barrier): the streams close, the workers of the new
  // generation regroup (Regroup) and the caller pulls and goes on as above.
  // Any other failure comes back as it is; one while recovering carries both.
  absl::Status Recover(const absl::Status& failure) override;

 private:
  struct Key {
    Shape shape;
    std::vector<float> initial;        // until committed
    std::vector<int64_t> versions;     // by part index: the version of the value this worker has
    std::vector<int64_t> sent;         // by part index: the version the pushed gradient was on
    std::vector<char> pending;         // by part index: pushed, not answered (guarded by mu_)
    PinCount pins;                     // the transport still reading the pushed gradient
    bool in_flight = false;            // between PushPull and Wait (written under mu_)
    float* destination = nullptr;      // where the answers go (guarded by mu_ while in flight)
    int awaiting = 0;                  // parts not answered yet (guarded by mu_)
    Tensor pushed_copy;                // what Push sends (the caller may reuse its gradient)
    std::vector<float> pushed_result;  // Push's answers, for the next Pull
    std::vector<float> residual;       // 2-bit compression: what was not sent yet
    bool result_unread = false;
  };

  void OnAnswers(int shard, absl::Span<const Answer> answers) override;
  void OnStreamEnd(int shard, const absl::Status& status) override;

  absl::StatusOr<Key*> Find(int64_t key, const Tensor& t, absl::string_view what);
  // Sends every part of the key's gradient; their answers will go to destination.
  absl::Status Start(int64_t key, Key* k, const Tensor& grad, float* destination);
  // Ends every stream and waits until the transport has let go of every tensor it was given,
  // so that after a failed Wait, and before the store goes away, nothing writes into the
  // caller's tensors or reads them. A transport stuck on a dead link may hold on to sent
  // bytes: after a bounded wait the store says so and goes on.
  void StopStreams();
  absl::Status CheckAnswer(int shard, const PartHeader& h, size_t bytes, const Part** part)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a wait ended early: a refused answer, a stream's end, the job's end.
  absl::Status Interrupted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error of a wait for key k that saw no answer for answer_timeout.
  absl::Status TimedOut(int64_t key, const Key& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // On the first push or pull (and its outcome ever after): every rank computes the partition
  // map; rank 0 sends each shard its settings and initial values; a barrier checks that every
  // rank computed the same map; then the streams open. Answers come only after that.
  absl::Status Commit();
  absl::Status CommitOnce();
  // The workers of shards_'s generation meet (a barrier), rank 0 sets the shards up for it
  // (RegenerateShards) and, after a second barrier, the streams open: the caller pulls every
  // key. When the job moves on to yet another generation meanwhile, it starts over there.
  absl::Status Regroup();
  absl::Status RegroupOnce();
  // Closed streams dialled again at the shards of the job's current generation (shards_).
  absl::Status MoveToCurrentGeneration();
  // Recover's path for a shard's death (failure: how its stream ended): MembershipChangedError
  // when the workers change meanwhile.
  absl::Status RecoverShards(const absl::Status& failure);
  // After a recovery: nothing in flight, the streams open again (already failed when the
  // generation moved on meanwhile).
  void ReopenStreams();
  // Rank 0 of a new generation: shards rank 0 never initialised are initialised; otherwise
  // every shard goes back to the newest checkpoint they all hold, renumbered for the new number
  // of workers, under the generation's update rule.
  absl::Status RegenerateShards();
  // Rank 0 says so when some shards hold no part (more shards than parts).
  void WarnAboutIdleShards() const;
  absl::Status InitShards();
  ShardConfig ShardConfigFor(int num_parts) const;
  // Shard `shard`'s parts with their initial values or, for a restarted shard (its checkpoint
  // replaces them), with the zeros of placeholder (as long as the largest part).
  std::vector<InitialPart> InitialParts(int shard, absl::Span<const float> placeholder) const;
  // Rank 0: a shard restarted from its checkpoint is set up again (the values sent, zeros, are
  // replaced by the checkpoint's); returns the checkpoint's step.
  absl::StatusOr<int64_t> SetUpRestartedShard(int shard);
  // Rank 0, in Recover: `restarted` (shard ranks) came back from a checkpoint; every shard goes
  // to its step.
  absl::Status RollBackShards(const std::vector<int>& restarted);
  absl::Status PullCurrent(int64_t key, Tensor* out);

  const KVStoreMode mode_;
  JobMembership* const membership_;
  const std::unique_ptr<ShardTransport> transport_;
  const DistKVStoreOptions options_;
  int end_listener_ = -1;
  OptimizerSpec optimizer_;
  bool has_optimizer_ = false;
  bool committed_ = false;
  absl::Status commit_status_;
  PartitionMap map_;  // fixed once committed
  uint64_t fingerprint_ = 0;
  std::vector<std::unique_ptr<Key>> keys_;  // stable addresses: answers and pins refer to them
  std::vector<int64_t> auxiliary_keys_;
  // The shards the streams are open to (JobMembership::WaitForShards).
  ShardsView shards_;
  UpdateRuleFor update_rule_;
  int generation_listener_ = -1;

  absl::Mutex mu_;  // guards the Key fields marked so, and the job and stream state below
  bool job_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stream_error_ ABSL_GUARDED_BY(mu_);
  int64_t answers_ ABSL_GUARDED_BY(mu_) = 0;  // answers accepted so far: a wait's progress
  // The newest membership generation the scheduler spoke of (shards_'s, or one past it: the
  // store stops and regroups there).
  int64_t generation_heard_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_DIST_KVSTORE_CORE_H_
