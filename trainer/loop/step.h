#ifndef COHORT_TRAINER_LOOP_STEP_H_
#define COHORT_TRAINER_LOOP_STEP_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "trainer/base/thread_team.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/loop/training_observer.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/model.h"

namespace cohort {

// Registers every parameter with the kvstore under its key (its index in model order), with
// its current value, and the model's state (batch-norm running statistics), if it has any, as
// one auxiliary key after them (StateKey); then pulls every key back, so all ranks of a
// distributed job start from the same (rank 0's, or a checkpoint's) weights and statistics.
absl::Status InitKVStore(const Model& model, KVStore* kvstore);

// Pulls every key's current value into the model: its parameters and state (after a
// kvstore's Recover, training goes on from those).
absl::Status PullKVStore(const Model& model, KVStore* kvstore);

// The auxiliary key holding the model's state, all its tensors one after another in model
// order; -1 for a model without state.
int64_t StateKey(const Model& model);

// One copy of the model on one device context, with the backend that runs it (nullptr: the
// host's default).
struct Replica {
  Model* model;
  SoftmaxCrossEntropyLoss* loss;
  Backend* backend;
};

// Runs training steps, the same for the trainer, the benchmark and the worker: forward, loss,
// backward, and the exchange of every parameter with the kvstore (PushPull into the first
// replica's own value).
//  - overlapped (the default): each gradient is pushed as soon as backward produces it (last
//    layer first, through the model's gradient-ready hook), and the next step's forward waits
//    before each layer only for that layer's values (first layer first, through the
//    before-forward hook), so communication runs behind backward and the next forward;
//  - not overlapped: every gradient is pushed after backward, then every value waited for.
// The replicas' parameters reach the host kvstore through a ReplicaExchange (in place for F32
// host parameters; host copies for a device's): each gradient starts on its way when the
// replica's hook reports it and is pushed once the replicas' sum has arrived (checked at every
// later hook, waited for at the end of backward); each pulled value goes back up, on the
// replica's own thread, before the forward that reads it.
// With several replicas (--devices cpu:2, gpu:0,1), each trains on its own thread on a
// contiguous slice of the local batch (sizes differ by at most one); a parameter's gradients
// are reduced, weighted by slice size in replica order (the gradient of the mean loss over the
// whole local batch), and pushed once; every replica takes the pulled value. The reduction is
// the backend's own where it has one (GPUs: on the first GPU, Backend::MakeReplicaExchange),
// else the host's over each replica's exchange. The replicas start from the first one's values.
// Batch-norm running statistics are averaged after every step: across the replicas (summed in
// replica order, times 1/R), then across workers through the kvstore's auxiliary key
// (StateKey), pushed after the gradients and taken back into every replica before the next
// forward (a lone replica of a local store keeps its own); so every worker and replica holds the same statistics, which a shard's checkpoint
// keeps with the parameters. After a step, values may still be arriving: call
// WaitForParameters before reading the first replica's weights or statistics (evaluation,
// export). Installs the models' hooks for its lifetime; the replicas and kvstore must outlive
// it.
class StepRunner {
 public:
  StepRunner(std::vector<Replica> replicas, KVStore* kvstore, bool overlap);
  StepRunner(Model* model, SoftmaxCrossEntropyLoss* loss, KVStore* kvstore, bool overlap)
      : StepRunner({Replica{model, loss, nullptr}}, kvstore, overlap) {}
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // images: (N, C, H, W); labels: (N) I32; N ≥ the number of replicas.
  absl::StatusOr<StepResult> Step(const Tensor& images, const Tensor& labels);
  // Returns once every replica holds every parameter's latest pulled value and the averaged
  // batch-norm statistics.
  absl::Status WaitForParameters();

 private:
  struct Slice {
    Tensor images, labels;  // this replica's rows of the local batch
    double loss = 0;
    double forward_seconds = 0, backward_seconds = 0;  // less the kvstore calls meanwhile
  };

  int num_replicas() const { return static_cast<int>(replicas_.size()); }
  // Forward, loss and backward of replica r on its slice.
  void RunReplica(int r, const Tensor& images, const Tensor& labels);
  // Runs fn(r) for every replica r, on the replica's thread when there are several.
  void ForEachReplica(const std::function<void(int)>& fn);
  // The replicas' way to the host kvstore: the first backend's own reduction where it has one,
  // else each replica's ParameterExchange (made on its thread) with the host summing.
  std::unique_ptr<ReplicaExchange> MakeExchange();
  // Replica r's gradient of key is final: start it down; once every replica's is, reduce and
  // push it.
  void GradientReady(int r, int64_t key);
  void Send(int64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for key's pulled value and hands it to replica r.
  void Receive(int r, int64_t key);
  // Pushes the replicas' mean state to the state key (none: nothing to do).
  void SendState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the state key's value and writes it into every replica.
  void ReceiveState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CopyParameters(int from, int to);
  void CopyState(int from, int to);
  // Pushes the gradients a device has finished moving to the host (all of them, waiting, when
  // wait is true).
  void SendArrived(bool wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seconds spent in kvstore calls so far in this step.
  double CommSecondsSoFar();

  const std::vector<Replica> replicas_;
  KVStore* const kvstore_;
  const bool overlap_;
  const int64_t num_keys_;
  const int64_t state_key_;  // -1: the model has no state
  // Whether the state goes through the kvstore after every step: not for one replica of a
  // local store (the mean of one).
  const bool exchange_state_;
  std::vector<Slice> slices_;
  std::unique_ptr<ThreadTeam> team_;  // several replicas: one thread each
  absl::flat_hash_map<const Parameter*, int64_t> keys_;  // every replica's parameters
  // By replica: what its loss gradient is multiplied by (touched by the replica's thread only),
  // and its slice's share of the local batch, rows / local batch (set before the replicas run;
  // 1 for a lone replica).
  std::vector<float> gradient_scales_;
  std::vector<float> weights_;
  // The replicas' way to the host kvstore (calls serialised by mu_, BeginStep aside).
  std::unique_ptr<ReplicaExchange> exchange_;

  // Serialises the kvstore (one caller at a time) and the exchange's bookkeeping.
  absl::Mutex mu_;
  std::vector<char> in_flight_ ABSL_GUARDED_BY(mu_);  // by key
  std::vector<int> gradients_ready_ ABSL_GUARDED_BY(mu_);  // by key: replicas done this step
  std::vector<int64_t> moving_ ABSL_GUARDED_BY(mu_);  // keys on their way down from a device
  // By key: how many values were pulled, and per replica how many it has copied.
  std::vector<int64_t> pulls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int64_t>> copied_ ABSL_GUARDED_BY(mu_);
  // Several replicas: one replica's packed state.
  Tensor state_scratch_ ABSL_GUARDED_BY(mu_);
  // The replicas' mean state as pushed, and the workers' mean as pulled (F32, host).
  Tensor state_pushed_ ABSL_GUARDED_BY(mu_);
  Tensor state_pulled_ ABSL_GUARDED_BY(mu_);
  bool state_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  // Within a step: the first kvstore error (hooks cannot return one), the time in calls and
  // the bytes they moved.
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  double push_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double pull_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pushed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pulled_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_LOOP_STEP_H_
