// The oneDNN backend's pooling: max, average and global average.

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/cpu/onednn_ops.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace onednn {
namespace {

// Max, average (padding counted) and global average pooling. Global pooling is average
// pooling with the whole image as the window; its (N, C, 1, 1) output is the (N, C) tensor.
class Pool2dOnednn final : public Pool2dFrame {
 public:
  Pool2dOnednn(std::shared_ptr<Ctx> ctx, PoolKind kind, Pool2dSpec spec)
      : Pool2dFrame(kind, spec), ctx_(std::move(ctx)) {}

  // Max pooling's backward reads its workspace, the others nothing.
  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                                               {DNNL_ARG_DST, Mem(*ctx_, y_md_, out[0])}};
    if (mode == Mode::kTrain && kind_ == PoolKind::kMax) {
      args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    ctx_->Run(fwd_, args);
  }

  void Backward(Ins, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                                               {DNNL_ARG_DIFF_SRC, Mem(*ctx_, x_md_, grad_in[0])}};
    if (kind_ == PoolKind::kMax) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    ctx_->Run(bwd_, args);
  }

 private:
  void Build(Mode mode, const Shape& x) {
    if (cache_.Matches(x, mode)) return;
    dnnl::memory::dims kernel{spec_.kernel, spec_.kernel}, strides{spec_.stride, spec_.stride},
        pad_l{spec_.padding, spec_.padding}, pad_r = pad_l, y_hw{1, 1};
    if (kind_ == PoolKind::kGlobalAvg) {
      kernel = {x[2], x[3]};
      strides = {1, 1};
      pad_l = pad_r = {0, 0};
    } else {
      for (int d = 0; d < 2; ++d) {
        y_hw[d] = Pool2dOutputSize(spec_, x[2 + d]);
        // ceil_mode's last window reaches past the right padding: pad that side further (max
        // pooling ignores padded positions).
        pad_r[d] = std::max<int64_t>(
            spec_.padding, (y_hw[d] - 1) * spec_.stride + spec_.kernel - x[2 + d] - spec_.padding);
      }
    }
    x_md_ = ctx_->ActivationMd(x);
    // A global pooling's (N, C, 1, 1) is the same bytes blocked or plain: the (N, C) output.
    y_md_ = ctx_->ActivationMd(Shape{x[0], x[1], y_hw[0], y_hw[1]});
    const auto algo = kind_ == PoolKind::kMax ? dnnl::algorithm::pooling_max
                                          : dnnl::algorithm::pooling_avg_include_padding;
    dnnl::pooling_forward::primitive_desc fwd_pd(
        dnnl::pooling_forward::desc(Prop(mode), algo, x_md_, y_md_, strides, kernel, pad_l, pad_r),
        ctx_->engine);
    fwd_ = dnnl::pooling_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      // Max-pool backward needs the forward's argmax record (the workspace).
      if (kind_ == PoolKind::kMax) {
        workspace_ = HeldMemory(*ctx_, fwd_pd.workspace_desc(), &workspace_bytes_);
      }
      bwd_ = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(
          dnnl::pooling_backward::desc(algo, x_md_, y_md_, strides, kernel, pad_l, pad_r),
          ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;
  dnnl::memory::desc x_md_, y_md_;
  Tensor workspace_bytes_{Shape{0}};
  dnnl::memory workspace_;
  dnnl::primitive fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Op> MakePool2d(std::shared_ptr<Ctx> ctx, PoolKind kind, const Pool2dSpec& spec) {
  return std::make_unique<Pool2dOnednn>(std::move(ctx), kind, spec);
}
}  // namespace onednn
}  // namespace cohort
