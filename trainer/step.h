#ifndef COHORT_TRAINER_STEP_H_
#define COHORT_TRAINER_STEP_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/model.h"

namespace cohort {

// Registers every parameter with the kvstore under its key (its index in model order), with
// its current value, then pulls every key back, so all ranks of a distributed job start from
// the same (rank 0's) weights.
absl::Status InitKVStore(const Model& model, KVStore* kvstore);

struct StepResult {
  double loss = 0;          // the batch's mean loss
  double comm_seconds = 0;  // time the step spent in kvstore calls, waiting included
};

// Runs training steps, the same for the trainer, the benchmark and the worker: forward, loss,
// backward, and the exchange of every parameter with the kvstore (PushPull into the
// parameter's own value).
//  - overlapped (the default): each gradient is pushed as soon as backward produces it (last
//    layer first, through the model's gradient-ready hook), and the next step's forward waits
//    before each layer only for that layer's values (first layer first, through the
//    before-forward hook), so communication runs behind backward and the next forward;
//  - not overlapped: every gradient is pushed after backward, then every value waited for.
// After a step, values may still be arriving: call WaitForParameters before reading the
// model's weights (evaluation, export). Installs the model's hooks for its lifetime; the
// model, loss and kvstore must outlive it.
class StepRunner {
 public:
  StepRunner(Model* model, SoftmaxCrossEntropyLoss* loss, KVStore* kvstore, bool overlap);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // images: (N, C, H, W); labels: (N) I32.
  absl::StatusOr<StepResult> Step(const Tensor& images, const Tensor& labels);
  // Returns once every parameter holds its latest pulled value.
  absl::Status WaitForParameters();

 private:
  void Send(int64_t key);
  void Receive(int64_t key);

  Model* const model_;
  SoftmaxCrossEntropyLoss* const loss_;
  KVStore* const kvstore_;
  const bool overlap_;
  absl::flat_hash_map<const Parameter*, int64_t> keys_;
  std::vector<char> in_flight_;  // by key
  // Within a step: the first kvstore error (hooks cannot return one) and the time in calls.
  absl::Status status_;
  double comm_seconds_ = 0;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_STEP_H_
