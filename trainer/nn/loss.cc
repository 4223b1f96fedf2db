#include "trainer/nn/loss.h"

namespace cohort {
namespace {

// The loss and its gradient seed are scalars in double for the reference backend and in
// float for every other one, whatever it stores activations in.
DType ScalarDType(const Backend& backend) {
  return backend.dtype() == DType::kF64 ? DType::kF64 : DType::kF32;
}

}  // namespace

SoftmaxCrossEntropyLoss::SoftmaxCrossEntropyLoss(Backend* backend)
    : backend_(backend),
      op_(backend->SoftmaxCrossEntropy()),
      loss_(Shape{}, ScalarDType(*backend), backend->allocator()),
      seed_(Shape{}, ScalarDType(*backend), backend->allocator()),
      labels_scratch_(Shape{0}, DType::kI32, backend->allocator()),
      host_loss_(Shape{}, ScalarDType(*backend)),
      grad_logits_(Shape{0, 0}, backend->dtype(), backend->allocator()) {
  set_gradient_scale(1.0f);
}

void SoftmaxCrossEntropyLoss::set_gradient_scale(float scale) {
  Tensor host(Shape{}, DType::kF64);
  host.data<double>()[0] = scale;
  seed_.CopyFrom(ConvertTo(host, seed_.dtype()));
}

double SoftmaxCrossEntropyLoss::Forward(const Tensor& logits, const Tensor& labels) {
  Compute(logits, labels);
  return ReadLoss();
}

void SoftmaxCrossEntropyLoss::Compute(const Tensor& logits, const Tensor& labels) {
  labels_ = &backend_->ImportLabels(labels, &labels_scratch_);
  const Tensor* in[] = {&logits, labels_};
  Tensor* out[] = {&loss_};
  op_->Forward(Mode::kTrain, in, out);
  logits_ = &logits;
}

double SoftmaxCrossEntropyLoss::ReadLoss() {
  COHORT_CHECK(logits_ != nullptr, "loss ReadLoss before Compute");
  // Reading the loss waits for the device's work so far.
  host_loss_.CopyFrom(loss_);
  return host_loss_.dtype() == DType::kF64 ? host_loss_.data<double>()[0]
                                            : host_loss_.data<float>()[0];
}

const Tensor& SoftmaxCrossEntropyLoss::Backward() {
  COHORT_CHECK(logits_ != nullptr, "loss Backward before Forward");
  grad_logits_.Resize(logits_->shape());
  const Tensor* in[] = {logits_, labels_};
  const Tensor* out[] = {&loss_};
  const Tensor* grad_out[] = {&seed_};
  Tensor* grad_in[] = {&grad_logits_, nullptr};
  op_->Backward(in, out, grad_out, grad_in);
  return grad_logits_;
}

}  // namespace cohort
