#include "trainer/ops/cpu/onednn_backend.h"

#include <omp.h>

#include <cstring>

#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/cpu/onednn_ops.h"
#include "trainer/ops/op_frames.h"

namespace cohort {

OnednnBackend::OnednnBackend(int threads, ActivationLayout layout)
    : ctx_(std::make_shared<Context>(layout)), threads_(threads) {}
OnednnBackend::~OnednnBackend() = default;

int OnednnBackend::channel_block() const { return ctx_->block; }
bool OnednnBackend::HoldsBlocked(const Shape& activation) const {
  return ctx_->Blocked(activation);
}

void OnednnBackend::ActivationFromPlain(const Tensor& plain, Tensor* held) const {
  held->Resize(plain.shape());
  ctx_->Hold(plain, held);
}

void OnednnBackend::ActivationToPlain(const Tensor& held, Tensor* plain) const {
  plain->Resize(held.shape());
  Tensor scratch;
  const Tensor* p = ctx_->Plain(&held, &scratch);
  std::memcpy(plain->raw(), p->raw(), p->nbytes());
}

const Tensor& OnednnBackend::ImportImages(const Tensor& images, Tensor* scratch) {
  if (!ctx_->Blocked(images.shape())) return images;
  ActivationFromPlain(images, scratch);
  return *scratch;
}

// oneDNN's OpenMP runtime sizes each parallel region by the calling thread's own setting.
void OnednnBackend::BindCallingThread() {
  if (threads_ > 0) omp_set_num_threads(threads_);
}

std::unique_ptr<Op> OnednnBackend::Conv2d(const Conv2dSpec& spec) {
  return onednn::MakeConv2d(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::MaxPool2d(const Pool2dSpec& spec) {
  return onednn::MakePool2d(ctx_, PoolKind::kMax, spec);
}
std::unique_ptr<Op> OnednnBackend::AvgPool2d(const Pool2dSpec& spec) {
  return onednn::MakePool2d(ctx_, PoolKind::kAvg, spec);
}
std::unique_ptr<Op> OnednnBackend::GlobalAvgPool() {
  return onednn::MakePool2d(ctx_, PoolKind::kGlobalAvg, Pool2dSpec{});
}
std::unique_ptr<Op> OnednnBackend::BatchNorm(const BatchNormSpec& spec) {
  return onednn::MakeBatchNorm(ctx_, spec, /*relu=*/false);
}
std::unique_ptr<Op> OnednnBackend::Add() { return onednn::MakeAdd(ctx_); }
std::unique_ptr<Op> OnednnBackend::Concat() {
  return onednn::MakeConcat(ctx_, Backend::Concat(), Backend::Concat());
}
std::unique_ptr<Op> OnednnBackend::Flatten() {
  return onednn::MakeFlatten(ctx_, Backend::Flatten());
}
std::unique_ptr<Op> OnednnBackend::Dropout(const DropoutSpec& spec) {
  return onednn::MakeDropout(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::SubsamplePad(const SubsamplePadSpec& spec) {
  return onednn::MakeSubsamplePad(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::FuseRelu(const Op& op) {
  if (op.name() == "batch_norm") {
    return onednn::MakeBatchNorm(ctx_, static_cast<const BatchNormFrame&>(op).spec(),
                                 /*relu=*/true);
  }
  if (op.name() == "add") return onednn::MakeAddRelu(ctx_);
  return nullptr;
}

double OnednnBackend::primitive_seconds() const { return ctx_->primitive_seconds; }
std::unique_ptr<Op> OnednnBackend::Relu() { return onednn::MakeRelu(ctx_); }
std::unique_ptr<Op> OnednnBackend::Linear() { return onednn::MakeLinear(ctx_); }
std::unique_ptr<Op> OnednnBackend::SoftmaxCrossEntropy() {
  return onednn::MakeSoftmaxCrossEntropy(ctx_);
}

}  // namespace cohort
