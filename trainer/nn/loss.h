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

  // logits: (N, K); labels: (N) I32 in [0, K), on the host or already where the backend
  // reads them. Returns the mean loss.
  double Forward(const Tensor& logits, const Tensor& labels);
  // Forward without reading the loss back: on a GPU the host goes on queueing work (backward)
  // instead of waiting for the forward pass. ReadLoss gives the loss of the last of them.
  void Compute(const Tensor& logits, const Tensor& labels);
  double ReadLoss();
  // Gradient of the mean loss w.r.t. the logits of the last Forward, times the gradient
  // scale: (N, K).
  const Tensor& Backward();
  // Multiplies every gradient Backward returns (fp16 loss scaling); 1 by default.
  void set_gradient_scale(float scale);

 private:
  Backend* backend_;
  std::unique_ptr<Op> op_;
  const Tensor* logits_ = nullptr;
  const Tensor* labels_ = nullptr;
  Tensor loss_;
  Tensor seed_;  // d(scaled loss)/d(loss): the gradient scale
  Tensor labels_scratch_;
  Tensor host_loss_;
  Tensor grad_logits_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_LOSS_H_
