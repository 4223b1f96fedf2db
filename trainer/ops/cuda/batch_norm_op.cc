// The CUDA backend's batch norm.

#include <memory>
#include <utility>
#include <vector>

#include "trainer/ops/cuda/cuda_backend_shared.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/cuda_ops.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {
namespace {

// ----------------------------------------------------------------------------------------
// Batch norm: cuDNN's spatial batch norm. Training goes through the Ex calls: only they reach
// the channels-last kernels (with the persistent mode); the plain calls run a
// per-channel kernel that took 93% of a ResNet-50 step on an H200. cuDNN wants scale, shift and
// statistics in fp32: 16-bit parameters are cast to and from fp32 copies, and the running
// statistics are fp32 tensors. With relu, the ReLU after it is fused (the Ex calls'
// CUDNN_BATCHNORM_OPS_BN_ACTIVATION, which cuDNN runs in its persistent channels-last mode:
// 16-bit activations, channels last); its backward reads y.

class BatchNormOp final : public BatchNormFrame {
 public:
  BatchNormOp(std::shared_ptr<Shared> s, BatchNormSpec spec, bool relu)
      : BatchNormFrame(spec), s_(std::move(s)), relu_(relu) {
    Allocator* a = s_->ctx->allocator();
    for (Tensor* t : {&running_mean_, &running_var_, &gamma_, &beta_, &dgamma_, &dbeta_,
                      &saved_mean_, &saved_inv_std_}) {
      *t = Tensor(Shape{spec.channels}, DType::kF32, a);
    }
    dx_scratch_ = Tensor(Shape{0}, s_->dtype, a);
    reserve_ = Tensor(Shape{0}, DType::kF32, a);  // bytes, counted in floats
    Tensor ones(Shape{spec.channels}, DType::kF32);
    for (float& v : ones.span<float>()) v = 1.0f;
    running_var_.CopyFrom(ones);
    running_mean_.SetZero();
  }

  std::vector<OpState> State() override {
    return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
  }

  // x, with the saved statistics (and, with relu, y).
  BackwardReads ReadsInBackward() const override { return {true, relu_}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    Prepare(in[0]->shape());
    const void* gamma = AsF32(*in[1], &gamma_);
    const void* beta = AsF32(*in[2], &beta_);
    cudnnHandle_t h = s_->ctx->cudnn();
    if (mode == Mode::kTrain) {
      COHORT_CUDNN_CHECK(cudnnBatchNormalizationForwardTrainingEx(
          h, train_mode_, Ops(), &kOne, &kZero, x_.get(), Ptr(in[0]), nullptr, nullptr, x_.get(),
          Ptr(out[0]), bn_.get(), gamma, beta, spec_.momentum, Ptr(&running_mean_),
          Ptr(&running_var_), spec_.eps, Ptr(&saved_mean_), Ptr(&saved_inv_std_), Relu(),
          s_->ctx->Workspace(forward_workspace_), forward_workspace_, ReserveSpace(),
          reserve_.nbytes()));
      return;
    }
    COHORT_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
        h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(), Ptr(in[0]), x_.get(), Ptr(out[0]),
        bn_.get(), gamma, beta, Ptr(&running_mean_), Ptr(&running_var_), spec_.eps));
    if (relu_) {
      COHORT_CUDA_CHECK(ReluForward(Ptr(out[0]), Ptr(out[0]), s_->elem(), out[0]->numel(),
                                    s_->stream()));
    }
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    Prepare(in[0]->shape());
    const bool f32 = s_->dtype == DType::kF32;
    // In fp32 the parameter gradients land in place; otherwise in fp32 copies, cast after.
    void* dgamma = f32 && grad_in[1] != nullptr ? Ptr(grad_in[1]) : Ptr(&dgamma_);
    void* dbeta = f32 && grad_in[2] != nullptr ? Ptr(grad_in[2]) : Ptr(&dbeta_);
    // cuDNN always writes the input gradient; a scratch buffer takes it when nobody wants it.
    void* dx = grad_in[0] != nullptr ? Ptr(grad_in[0]) : (dx_scratch_.Resize(in[0]->shape()),
                                                           Ptr(&dx_scratch_));
    const void* gamma = f32 ? Ptr(in[1]) : Ptr(&gamma_);  // the Forward's fp32 copies
    const void* beta = relu_ ? (f32 ? Ptr(in[2]) : Ptr(&beta_)) : nullptr;  // for the ReLU
    COHORT_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
        s_->ctx->cudnn(), train_mode_, Ops(), &kOne, &kZero, &kOne, &kZero, x_.get(), Ptr(in[0]),
        relu_ ? x_.get() : nullptr, relu_ ? Ptr(out[0]) : nullptr, x_.get(), Ptr(grad_out[0]),
        nullptr, nullptr, x_.get(), dx, bn_.get(), gamma, beta, dgamma, dbeta, spec_.eps,
        Ptr(&saved_mean_), Ptr(&saved_inv_std_), Relu(), s_->ctx->Workspace(backward_workspace_),
        backward_workspace_, ReserveSpace(), reserve_.nbytes()));
    if (f32) return;
    for (int k : {1, 2}) {
      if (grad_in[k] == nullptr) continue;
      COHORT_CUDA_CHECK(Cast(k == 1 ? dgamma : dbeta, Elem::kF32, Ptr(grad_in[k]), s_->elem(),
                             spec_.channels, s_->stream()));
    }
  }

 private:
  void Prepare(const Shape& x) {
    if (!last_.Changed(x)) return;
    x_.Set(*s_, x);
    // Channels-last fp32 too: the plain mode runs cuDNN's per-channel kernels there, 80% of a
    // ResNet-56 fp32 step on an H200.
    train_mode_ = s_->nhwc() ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
    COHORT_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bn_.get(), x_.get(), CUDNN_BATCHNORM_SPATIAL));
    cudnnHandle_t h = s_->ctx->cudnn();
    COHORT_CUDNN_CHECK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        h, train_mode_, Ops(), x_.get(), nullptr, x_.get(), bn_.get(), Relu(),
        &forward_workspace_));
    COHORT_CUDNN_CHECK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        h, train_mode_, Ops(), x_.get(), relu_ ? x_.get() : nullptr, x_.get(), nullptr,
        x_.get(), bn_.get(), Relu(), &backward_workspace_));
    size_t reserve = 0;
    COHORT_CUDNN_CHECK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
        h, train_mode_, Ops(), Relu(), x_.get(), &reserve));
    reserve_.Resize(Shape{static_cast<int64_t>((reserve + 3) / 4)});
  }

  cudnnBatchNormOps_t Ops() const {
    return relu_ ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN;
  }
  cudnnActivationDescriptor_t Relu() const { return relu_ ? relu_desc_.get() : nullptr; }

  // What the training Forward leaves for Backward beyond the saved statistics (none: null).
  void* ReserveSpace() { return reserve_.numel() > 0 ? Ptr(&reserve_) : nullptr; }

  // p itself in fp32, else its fp32 copy in *copy.
  const void* AsF32(const Tensor& p, Tensor* copy) {
    if (p.dtype() == DType::kF32) return Ptr(&p);
    COHORT_CUDA_CHECK(Cast(Ptr(&p), s_->elem(), Ptr(copy), Elem::kF32, p.numel(), s_->stream()));
    return Ptr(copy);
  }

  std::shared_ptr<Shared> s_;
  const bool relu_;
  ReluDesc relu_desc_;
  TensorDesc x_, bn_;
  LastShape last_;
  cudnnBatchNormMode_t train_mode_ = CUDNN_BATCHNORM_SPATIAL;
  Tensor running_mean_, running_var_;
  Tensor gamma_, beta_, dgamma_, dbeta_;  // fp32 copies for 16-bit parameters
  Tensor saved_mean_, saved_inv_std_;     // from the training Forward, for Backward
  Tensor reserve_;                        // likewise, the Ex calls' reserve space
  size_t forward_workspace_ = 0, backward_workspace_ = 0;
  Tensor dx_scratch_;
};

}  // namespace

std::unique_ptr<Op> MakeBatchNormOp(std::shared_ptr<Shared> s, const BatchNormSpec& spec,
                                    bool relu) {
  return std::make_unique<BatchNormOp>(std::move(s), spec, relu);
}
}  // namespace cohort::cuda
