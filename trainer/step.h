#ifndef COHORT_TRAINER_STEP_H_
#define COHORT_TRAINER_STEP_H_

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
  double comm_seconds = 0;  // time spent in kvstore pushes and pulls
};

// One training step, the same for the trainer, the benchmark and the worker: forward, loss,
// backward, then every gradient pushed (last layer first), then every updated value pulled
// back into the model (first layer first). images: (N, C, H, W); labels: (N) I32.
absl::StatusOr<StepResult> TrainStep(Model* model, SoftmaxCrossEntropyLoss* loss,
                                     KVStore* kvstore, const Tensor& images,
                                     const Tensor& labels);

}  // namespace cohort

#endif  // COHORT_TRAINER_STEP_H_
