// The oneDNN backend's convolutions.

#include <memory>
#include <unordered_map>

#include "trainer/base/check.h"
#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/cpu/onednn_ops.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace onednn {
namespace {

// Convolutions run in the blocked layouts oneDNN picks (several times faster than plain NCHW
// here, reorders included). Activations held blocked are already in them; the weights, plain,
// are reordered each step (they change every step). oneDNN also picks the algorithm
// (convolution_auto): Winograd for wide 3×3 problems with large batches on AVX-512 (ResNet-20's
// at batch 128), direct otherwise.
class Conv2dOnednn final : public Conv2dFrame {
 public:
  Conv2dOnednn(std::shared_ptr<Ctx> ctx, Conv2dSpec spec)
      : Conv2dFrame(spec), ctx_(std::move(ctx)) {}

  // x for the weights' gradient.
  BackwardReads ReadsInBackward() const override { return {true, false}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape(), in[1]->shape(), out[0]->shape());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, fwd_x_.In(*ctx_, in[0])},
                                               {DNNL_ARG_WEIGHTS, fwd_w_.In(*ctx_, in[1])},
                                               {DNNL_ARG_DST, fwd_y_.Out(*ctx_, out[0])}};
    if (spec_.bias) args.emplace(DNNL_ARG_BIAS, Mem(*ctx_, b_md_, in[2]));
    ctx_->Run(fwd_, args);
    fwd_y_.Finish(*ctx_, out[0]);
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] != nullptr) {
      ctx_->Run(bwd_data_, {{DNNL_ARG_DIFF_DST, data_dy_.In(*ctx_, grad_out[0])},
                            {DNNL_ARG_WEIGHTS, data_w_.In(*ctx_, in[1])},
                            {DNNL_ARG_DIFF_SRC, data_dx_.Out(*ctx_, grad_in[0])}});
      data_dx_.Finish(*ctx_, grad_in[0]);
    }
    if (grad_in[1] != nullptr) {
      // x was reordered by Forward and dy by the data gradient just now: where the weight
      // gradient wants the same layouts, their buffers serve again.
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC, weights_x_same_as_fwd_ ? fwd_x_.Staged(*ctx_, in[0])
                                                : weights_x_.In(*ctx_, in[0])},
          {DNNL_ARG_DIFF_DST, weights_dy_same_as_data_ && grad_in[0] != nullptr
                                  ? data_dy_.Staged(*ctx_, grad_out[0])
                                  : weights_dy_.In(*ctx_, grad_out[0])},
          {DNNL_ARG_DIFF_WEIGHTS, weights_dw_.Out(*ctx_, grad_in[1])}};
      if (spec_.bias) {
        COHORT_CHECK(grad_in[2] != nullptr, "conv2d computes weight and bias gradients together");
        args.emplace(DNNL_ARG_DIFF_BIAS, Mem(*ctx_, b_md_, grad_in[2]));
      }
      ctx_->Run(bwd_weights_, args);
      weights_dw_.Finish(*ctx_, grad_in[1]);
    }
  }

 private:
  void Build(Mode mode, const Shape& x, const Shape& w, const Shape& y) {
    if (cache_.Matches(x, mode)) return;
    const dnnl::memory::desc x_md = ctx_->ActivationMd(x), w_md = Md(w, tag::oihw),
                             y_md = ctx_->ActivationMd(y);
    const dnnl::memory::desc x_any(Dims(x), dt::f32, tag::any), w_any(Dims(w), dt::f32, tag::any),
        y_any(Dims(y), dt::f32, tag::any);
    // A zero descriptor turns the bias off.
    b_md_ = spec_.bias ? Md(Shape{w[0]}, tag::x) : dnnl::memory::desc();
    const dnnl::memory::dims strides{spec_.stride, spec_.stride}, pad{spec_.padding, spec_.padding};
    const auto algo = dnnl::algorithm::convolution_auto;
    dnnl::convolution_forward::primitive_desc fwd_pd(
        dnnl::convolution_forward::desc(Prop(mode), algo, x_any, w_any, b_md_, y_any, strides,
                                        pad, pad),
        ctx_->engine);
    fwd_ = dnnl::convolution_forward(fwd_pd);
    // The staged x serves the weights' gradient too: it stays until Backward.
    fwd_x_.Build(*ctx_, x_md, fwd_pd.src_desc(), true, &staged_x_);
    fwd_w_.Build(*ctx_, w_md, fwd_pd.weights_desc(), true, &ctx_->staging[kWeights]);
    fwd_y_.Build(*ctx_, y_md, fwd_pd.dst_desc(), false, &ctx_->staging[kDestination]);
    if (mode == Mode::kTrain) {
      dnnl::convolution_backward_data::primitive_desc data_pd(
          dnnl::convolution_backward_data::desc(algo, x_any, w_any, y_any, strides, pad, pad),
          ctx_->engine, fwd_pd);
      bwd_data_ = dnnl::convolution_backward_data(data_pd);
      data_dy_.Build(*ctx_, y_md, data_pd.diff_dst_desc(), true, &ctx_->staging[kDestination]);
      data_w_.Build(*ctx_, w_md, data_pd.weights_desc(), true, &ctx_->staging[kWeights]);
      data_dx_.Build(*ctx_, x_md, data_pd.diff_src_desc(), false, &ctx_->staging[kSource]);
      dnnl::convolution_backward_weights::primitive_desc weights_pd(
          dnnl::convolution_backward_weights::desc(algo, x_any, w_any, b_md_, y_any, strides,
                                                   pad, pad),
          ctx_->engine, fwd_pd);
      bwd_weights_ = dnnl::convolution_backward_weights(weights_pd);
      weights_x_same_as_fwd_ = weights_pd.src_desc() == fwd_pd.src_desc();
      weights_dy_same_as_data_ = weights_pd.diff_dst_desc() == data_pd.diff_dst_desc();
      // After the data gradient: its staged dy serves again, or this one replaces it.
      weights_x_.Build(*ctx_, x_md, weights_pd.src_desc(), true, &ctx_->staging[kSource]);
      weights_dy_.Build(*ctx_, y_md, weights_pd.diff_dst_desc(), true,
                        &ctx_->staging[kDestination]);
      weights_dw_.Build(*ctx_, w_md, weights_pd.diff_weights_desc(), false,
                        &ctx_->staging[kWeights]);
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;
  dnnl::memory::desc b_md_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  StagedArg fwd_x_, fwd_w_, fwd_y_;
  StagedArg data_dy_, data_w_, data_dx_;
  StagedArg weights_x_, weights_dy_, weights_dw_;
  Tensor staged_x_{Shape{0}};
  bool weights_x_same_as_fwd_ = false;
  bool weights_dy_same_as_data_ = false;
};

}  // namespace

std::unique_ptr<Op> MakeConv2d(std::shared_ptr<Ctx> ctx, const Conv2dSpec& spec) {
  return std::make_unique<Conv2dOnednn>(std::move(ctx), spec);
}
}  // namespace onednn
}  // namespace cohort
