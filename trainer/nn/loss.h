#ifndef COHORT_TRAINER_NN_LOSS_H_
#define COHORT_TRAINER_NN_LOSS_H_

#include <memory>

#include "trainer/ops/op.h"

namespace cohort {

// Mean softmax cross-entropy over the batch, on a backend's op. Holds the buffers it returns.
// Not thread-safe.
class SoftmaxCrossEntropyLoss {
 public:
  explicit SoftmaxCrossEntropyLoss(Backend* backend);

  // logits: (N, K); labels: (N) I32 in [0, K). Returns the mean loss.
  double Forward(const Tensor& logits, const Tensor& labels);
  // Gradient of the mean loss w.r.t. the logits of the last Forward: (N, K).
  const Tensor& Backward();

 private:
  std::unique_ptr<Op> op_;
  const Tensor* logits_ = nullptr;
  const Tensor* labels_ = nullptr;
  Tensor loss_;
  Tensor one_;  // d(loss)/d(loss)
  Tensor grad_logits_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_LOSS_H_
