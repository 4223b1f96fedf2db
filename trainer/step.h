#ifndef COHORT_TRAINER_STEP_H_
#define COHORT_TRAINER_STEP_H_

#include "absl/status/statusor.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/model.h"

namespace cohort {

// Registers every parameter with the kvstore under its key (its index in model order), with
// its current value.
absl::Status InitKVStore(const Model& model, KVStore* kvstore);

// One training step, the same for the trainer, the benchmark and (later) the worker: forward,
// loss, backward, then each parameter's gradient pushed and its updated value pulled back
// into the model. images: (N, C, H, W); labels: (N) I32. Returns the batch's mean loss.
absl::StatusOr<double> TrainStep(Model* model, SoftmaxCrossEntropyLoss* loss, KVStore* kvstore,
                                 const Tensor& images, const Tensor& labels);

}  // namespace cohort

#endif  // COHORT_TRAINER_STEP_H_
