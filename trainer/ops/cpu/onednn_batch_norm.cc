// The oneDNN backend's batch norm, with or without the ReLU after it.

#include <memory>
#include <unordered_map>
#include <vector>

#include "trainer/base/check.h"
#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/cpu/onednn_ops.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace onednn {
namespace {

// Batch norm with scale (γ) and shift (β). oneDNN computes the batch statistics in kTrain
// and reads the running ones in kEval (use_global_stats); it does not keep running
// statistics, so the op folds each batch's into them. With relu, the ReLU after it is fused
// (fuse_norm_relu): y = max(0, batch_norm(x)), the forward keeping which elements passed
// (the workspace) for the backward.
class BatchNormOnednn final : public BatchNormFrame {
 public:
  BatchNormOnednn(std::shared_ptr<Ctx> ctx, BatchNormSpec spec, bool relu)
      : BatchNormFrame(spec),
        ctx_(std::move(ctx)),
        relu_(relu),
        running_mean_(Shape{spec.channels}),
        running_var_(Shape{spec.channels}),
        mean_(Shape{spec.channels}),
        var_(Shape{spec.channels}) {
    running_mean_.SetZero();
    for (float& v : running_var_.span<float>()) v = 1.0f;
  }

  std::vector<OpState> State() override {
    return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
  }

  // x (and, with relu, the workspace).
  BackwardReads ReadsInBackward() const override { return {true, false}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    Build(mode, x);
    const bool train = mode == Mode::kTrain;
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
        {DNNL_ARG_SCALE, Mem(*ctx_, c_md_, in[1])},
        {DNNL_ARG_SHIFT, Mem(*ctx_, c_md_, in[2])},
        {DNNL_ARG_MEAN, Mem(*ctx_, c_md_, train ? &mean_ : &running_mean_)},
        {DNNL_ARG_VARIANCE, Mem(*ctx_, c_md_, train ? &var_ : &running_var_)},
        {DNNL_ARG_DST, Mem(*ctx_, x_md_, out[0])}};
    if (train && relu_) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    ctx_->Run(fwd_, args);
    if (!train) return;
    const float m = spec_.momentum;
    const double count = static_cast<double>(x[0] * x[2] * x[3]);
    const float unbias = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
    float* rm = running_mean_.data<float>();
    float* rv = running_var_.data<float>();
    for (int64_t c = 0; c < spec_.channels; ++c) {
      rm[c] = (1 - m) * rm[c] + m * mean_.data<float>()[c];
      rv[c] = (1 - m) * rv[c] + m * var_.data<float>()[c] * unbias;
    }
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    COHORT_CHECK(grad_in[0] != nullptr && grad_in[1] != nullptr && grad_in[2] != nullptr,
                 "batch_norm computes the gradients of x, gamma and beta together");
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
        {DNNL_ARG_MEAN, Mem(*ctx_, c_md_, &mean_)},
        {DNNL_ARG_VARIANCE, Mem(*ctx_, c_md_, &var_)},
        {DNNL_ARG_DIFF_DST, Mem(*ctx_, x_md_, grad_out[0])},
        {DNNL_ARG_SCALE, Mem(*ctx_, c_md_, in[1])},
        // oneDNN 2.6 asks for the shift in backward too when use_shift is set.
        {DNNL_ARG_SHIFT, Mem(*ctx_, c_md_, in[2])},
        {DNNL_ARG_DIFF_SRC, Mem(*ctx_, x_md_, grad_in[0])},
        {DNNL_ARG_DIFF_SCALE, Mem(*ctx_, c_md_, grad_in[1])},
        {DNNL_ARG_DIFF_SHIFT, Mem(*ctx_, c_md_, grad_in[2])}};
    if (relu_) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    ctx_->Run(bwd_, args);
  }

 private:
  void Build(Mode mode, const Shape& x) {
    if (cache_.Matches(x, mode)) return;
    x_md_ = ctx_->ActivationMd(x);
    c_md_ = Md(Shape{spec_.channels}, tag::x);
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (mode == Mode::kEval) flags = flags | dnnl::normalization_flags::use_global_stats;
    if (relu_) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
    dnnl::batch_normalization_forward::primitive_desc fwd_pd(
        dnnl::batch_normalization_forward::desc(Prop(mode), x_md_, spec_.eps, flags), ctx_->engine);
    fwd_ = dnnl::batch_normalization_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      if (relu_) workspace_ = HeldMemory(*ctx_, fwd_pd.workspace_desc(), &workspace_bytes_);
      bwd_ = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
          dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, x_md_, x_md_,
                                                   spec_.eps, flags),
          ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  const bool relu_;
  ShapeCache cache_;
  Tensor running_mean_, running_var_;
  Tensor mean_, var_;  // (C) batch statistics of the last kTrain Forward (variance biased)
  dnnl::memory::desc x_md_, c_md_;
  Tensor workspace_bytes_{Shape{0}};
  dnnl::memory workspace_;  // with relu: which outputs of the last kTrain Forward passed
  dnnl::primitive fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Op> MakeBatchNorm(std::shared_ptr<Ctx> ctx, const BatchNormSpec& spec, bool relu) {
  return std::make_unique<BatchNormOnednn>(std::move(ctx), spec, relu);
}
}  // namespace onednn
}  // namespace cohort
