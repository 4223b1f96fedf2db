#include "trainer/nn/loss.h"

namespace cohort {
namespace {

double ScalarOf(const Tensor& t) {
  return t.dtype() == DType::kF64 ? t.data<double>()[0] : t.data<float>()[0];
}

}  // namespace

SoftmaxCrossEntropyLoss::SoftmaxCrossEntropyLoss(Backend* backend)
    : op_(backend->SoftmaxCrossEntropy()),
      loss_(Shape{}, backend->dtype()),
      one_(Shape{}, backend->dtype()),
      grad_logits_(Shape{0, 0}, backend->dtype()) {
  if (one_.dtype() == DType::kF64) {
    one_.data<double>()[0] = 1.0;
  } else {
    one_.data<float>()[0] = 1.0f;
  }
}

double SoftmaxCrossEntropyLoss::Forward(const Tensor& logits, const Tensor& labels) {
  const Tensor* in[] = {&logits, &labels};
  Tensor* out[] = {&loss_};
  op_->Forward(Mode::kTrain, in, out);
  logits_ = &logits;
  labels_ = &labels;
  return ScalarOf(loss_);
}

const Tensor& SoftmaxCrossEntropyLoss::Backward() {
  COHORT_CHECK(logits_ != nullptr, "loss Backward before Forward");
  grad_logits_.Resize(logits_->shape());
  const Tensor* in[] = {logits_, labels_};
  const Tensor* out[] = {&loss_};
  const Tensor* grad_out[] = {&one_};
  Tensor* grad_in[] = {&grad_logits_, nullptr};
  op_->Backward(in, out, grad_out, grad_in);
  return grad_logits_;
}

}  // namespace cohort
