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
#include "services/wire/part_write_queue.h"
#include "services/wire/pin_count.h"
#include "services/wire/wire_encoding.h"
#include "services/worker/shard_transport.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/kvstore/kvstore_mode.h"
#include "trainer/kvstore/partition.h"

namespace cohort {

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

// The worker's side of the data path without gRPC: the distributed kvstore's calls
// ("dist_sync", "dist_async") on a job membership and a transport to the shards, both injected.
// DistKVStore (composed_kvstore.h) commits it (Partition, then OpenStreams) before its first
// push or pull, and ShardRecovery recovers it after a shard's death or a change of the job's
// workers.
//
// Parameters live on the shards as parts (trainer/kvstore/partition.h). At the commit every
// rank computes the partition map; in generation 0 rank 0 sends each shard its settings and
// its parts' initial values, a barrier checks that every rank computed the same map, and the
// streams open. PushPull sends every part of a key on its shard's stream straight from the
// gradient's memory; each answer is checked (a part of a key in flight, from the shard holding
// it, of its size, not answered yet, one version past the push in dist_sync or later in
// dist_async) and its bytes copied straight into the destination. Wait returns
// once every part is in and the transport has let go of the gradient. It fails, and stops
// every stream so that nothing touches the caller's tensors afterwards, with:
//  - Internal naming the shard, key, part and version when an answer is refused (unknown part,
//    another shard's part, wrong size, a duplicate, the wrong version);
//  - Unavailable naming the shard and its address when a stream ends ("did the shard die?");
//  - the membership's end status when the job ends (Aborted with the scheduler's reason);
//  - DeadlineExceeded naming a missing part and its shard when no answer at all comes for
//    answer_timeout (a lost answer);
//  - MembershipChangedError when the scheduler starts a new generation of workers.
// After a failure every push and wait fails the same way until the streams reopen. A pull of
// a key with nothing in flight asks the shards for the current values. With replicated shards
// (the view's replicas), a stream ending as a dead shard's does not end a wait: the wait takes
// that shard's parts over to the backup the scheduler names at its place (TakeOver) and goes on.
//
// Calls come from one thread (KVStore's contract); answers arrive on the transport's threads.
class DistKVStoreCore : private AnswerReceiver {
 public:
  // mode: dist_sync or dist_async. membership outlives the core. shards: the view the
  // transport was dialled from (JobMembership::WaitForShards).
  DistKVStoreCore(KVStoreMode mode, JobMembership* membership,
                  std::unique_ptr<ShardTransport> transport, ShardsView shards,
                  const DistKVStoreOptions& options);
  ~DistKVStoreCore() override;

  KVStoreMode mode() const { return mode_; }
  // In the current membership generation (an elastic job's change renumbers the workers).
  int rank() const { return shards_.rank; }
  int num_workers() const { return shards_.num_workers; }
  int initial_num_workers() const { return membership_->num_workers(); }

  // KVStore's calls, as documented there. Before the commit only SetOptimizer, Init and
  // InitAuxiliary; the others after a successful Partition.
  absl::Status SetOptimizer(const OptimizerSpec& spec);
  absl::Status SetLearningRate(float lr);
  absl::Status Init(int64_t key, const Tensor& value);
  absl::Status InitAuxiliary(int64_t key, const Tensor& value);
  absl::Status PushPull(int64_t key, const Tensor& grad, Tensor* out);
  absl::Status Wait(int64_t key);
  absl::Status Push(int64_t key, const Tensor& grad);
  absl::Status Pull(int64_t key, Tensor* out);
  absl::Status Barrier();
  absl::StatusOr<std::vector<std::string>> Exchange(std::string payload);
  // dist_sync: the version every part is at (Internal naming two parts that disagree: shards
  // resumed from different checkpoints); dist_async: the least part version / W.
  absl::StatusOr<int64_t> StartStep();

  // The commit, once some key was initialised. Partition: every rank computes the partition
  // map of the keys initialised so far; Init is refused from then on. OpenStreams: generation 0's first meeting: rank 0 sets
  // up every shard (InitShards), a barrier checks the map, the streams open.
  bool has_keys() const { return !keys_.empty(); }
  absl::Status Partition();
  absl::Status OpenStreams();

  // What recovery works with: the shards the streams go to, the update rule, the partition's
  // fingerprint, and the keys' initial values (held until the shards were first set up).
  const ShardsView& shards() const { return shards_; }
  ShardTransport* transport() const { return transport_.get(); }
  const OptimizerSpec& optimizer() const { return optimizer_; }
  uint64_t fingerprint() const { return fingerprint_; }
  bool holds_initial_values() const;
  void ReleaseInitialValues();
  // Why the streams stopped, as far as recovery cares.
  struct Interruption {
    bool job_ended = false;
    bool newer_generation = false;  // the scheduler spoke of a generation past shards()'s
    absl::Status stream_error;      // a refused answer, a stream's end, a new generation
  };
  Interruption interruption() const;
  // Ends every stream and waits until the transport has let go of every tensor it was given,
  // so that after a failed Wait, and before the core goes away, nothing writes into the
  // caller's tensors or reads them. A transport stuck on a dead link may hold on to sent
  // bytes: after a bounded wait the core says so and goes on.
  void StopStreams();
  // Closed streams dialled again at `shards`'s addresses, which the core goes on with.
  void Redial(ShardsView shards);
  // Nothing in flight any more, and the streams open again (already failed when the job's
  // generation moved on meanwhile).
  void ReopenStreams();
  // Rank 0: every shard set up with its settings and its parts' initial values.
  absl::Status InitShards();
  // Rank 0: a shard restarted from its checkpoint set up again with `config` (the values sent,
  // zeros, are replaced by the checkpoint's); the step it resumed at, or -1 when it had no
  // checkpoint.
  absl::StatusOr<int64_t> SetUpRestartedShard(int shard, const ShardConfig& config);
  // The settings of shard `shard` in the current generation (with replicas: the parts it backs
  // up counted, and its backup's address).
  ShardConfig ShardConfigFor(int shard) const;

 private:
  struct Key {
    Shape shape;
    std::vector<float> initial;        // until the shards were set up
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
    absl::Span<const float> gradient;  // the push in flight's values (the caller's, or a copy)
    float lr = -1;                     // the push in flight's (PartHeader::lr)
  };
  // How long a worker waits for the scheduler to name the backup leading a dead shard's parts.
  static constexpr absl::Duration kTakeOverWait = absl::Seconds(30);
  // How long a wait ended by a shard closing its stream (it leaves a job that ended) waits for
  // this worker to hear the job's verdict, which says why (a heartbeat's answer).
  static constexpr absl::Duration kVerdictWait = absl::Seconds(2);

  void OnAnswers(int shard, absl::Span<const Answer> answers) override;
  void OnStreamEnd(int shard, const absl::Status& status) override;

  absl::StatusOr<Key*> Find(int64_t key, const Tensor& t, absl::string_view what);
  // Sends every part of the key's gradient; their answers will go to destination.
  absl::Status SendGradient(int64_t key, Key* k, const Tensor& grad, float* destination);
  // Sends part p of the key's gradient in flight, computed on k->sent's version.
  void SendPart(int64_t key, Key* k, const Part& p);
  // Replicated shards: the streams of the `lost` shards (they died) go to the shards the
  // scheduler names at their places, their backups, and the parts they had not answered are
  // sent there again. Unavailable when none is named in time, or under 2-bit compression.
  absl::Status TakeOver(const std::vector<int>& lost);
  absl::Status CheckAnswer(int shard, const PartHeader& h, size_t bytes, const Part** part)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a wait ended early: a refused answer, a stream's end, the job's end.
  absl::Status Interrupted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A wait that a shard's clean close ended: the job's verdict once this worker hears it
  // (within kVerdictWait), else `failure` as it is.
  absl::Status WithTheJobsVerdict(absl::Status failure) ABSL_LOCKS_EXCLUDED(mu_);
  // The error of a wait for key k that saw no answer for answer_timeout.
  absl::Status TimedOut(int64_t key, const Key& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rank 0 says so when some shards hold no part (more shards than parts).
  void WarnAboutIdleShards() const;
  // Shard `shard`'s parts (with replicas, also those it backs up, so marked) with their initial
  // values or, for a restarted shard (its checkpoint replaces them), with the zeros of
  // placeholder (as long as the largest part).
  std::vector<InitialPart> InitialParts(int shard, absl::Span<const float> placeholder) const;
  absl::Status PullCurrent(int64_t key, Tensor* out);
  // The first failure of an exchange with `shard` stops the streams (Interrupted says it); a
  // dead shard's (Unavailable) names the shard for recovery. Returns the failure.
  absl::Status StopOnFailure(int shard, absl::Status failure) ABSL_LOCKS_EXCLUDED(mu_);

  const KVStoreMode mode_;
  JobMembership* const membership_;
  const std::unique_ptr<ShardTransport> transport_;
  const DistKVStoreOptions options_;
  float lr_ = -1;  // SetLearningRate's, for the next pushes (the caller's thread)
  int end_listener_ = -1;
  OptimizerSpec optimizer_;
  bool has_optimizer_ = false;
  bool partitioned_ = false;
  PartitionMap map_;  // fixed once partitioned
  uint64_t fingerprint_ = 0;
  std::vector<std::unique_ptr<Key>> keys_;  // stable addresses: answers and pins refer to them
  std::vector<int64_t> auxiliary_keys_;
  // The shards the streams are open to (JobMembership::WaitForShards).
  ShardsView shards_;
  int generation_listener_ = -1;

  mutable absl::Mutex mu_;  // guards the Key fields marked so, and the job and stream state below
  bool job_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stream_error_ ABSL_GUARDED_BY(mu_);
  bool closed_by_shard_ ABSL_GUARDED_BY(mu_) = false;  // stream_error_ is a clean close
  int64_t answers_ ABSL_GUARDED_BY(mu_) = 0;  // answers accepted so far: a wait's progress
  // The newest membership generation the scheduler spoke of (shards_'s, or one past it: the
  // store stops and regroups there).
  int64_t generation_heard_ ABSL_GUARDED_BY(mu_) = 0;
  // Replicated shards: copies of every part, and the shards whose streams ended as a dead
  // shard's do, for the waiting caller to take over.
  const int replicas_;
  std::vector<int> lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_DIST_KVSTORE_CORE_H_
