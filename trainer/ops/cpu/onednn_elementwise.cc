// The oneDNN backend's element-wise ops: add, add + ReLU, ReLU, dropout.

#include <cstring>
#include <memory>
#include <vector>

#include "trainer/base/status_macros.h"
#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/cpu/onednn_ops.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace onednn {
namespace {

// y = a + b as a binary primitive. The gradient reaches both inputs unchanged (copies).
class AddOnednn final : public AddFrame {
 public:
  explicit AddOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    if (!cache_.Matches(x, Mode::kEval)) {
      md_ = ctx_->ActivationMd(x);
      fwd_ = dnnl::binary(dnnl::binary::primitive_desc(
          dnnl::binary::desc(dnnl::algorithm::binary_add, md_, md_, md_), ctx_->engine));
      cache_.Set(x, Mode::kEval);
    }
    ctx_->Run(fwd_, {{DNNL_ARG_SRC_0, Mem(*ctx_, md_, in[0])},
                     {DNNL_ARG_SRC_1, Mem(*ctx_, md_, in[1])},
                     {DNNL_ARG_DST, Mem(*ctx_, md_, out[0])}});
  }

  void Backward(Ins, Ins, Ins grad_out, Outs grad_in) override {
    for (Tensor* g : grad_in)
      if (g != nullptr) std::memcpy(g->raw(), grad_out[0]->raw(), grad_out[0]->nbytes());
  }

 private:
  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;  // one primitive serves both modes
  dnnl::memory::desc md_;
  dnnl::primitive fwd_;
};

// y = max(0, a + b): the sum with the ReLU after it as the binary primitive's post-op. Both
// inputs' gradient is dy where y > 0, else 0 (oneDNN's ReLU backward from its output): one
// tensor, which a layer hands to both.
class AddReluOnednn final : public Op {
 public:
  explicit AddReluOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  // y, which says where the ReLU passed.
  BackwardReads ReadsInBackward() const override { return {false, true}; }

  absl::string_view name() const override { return "add_relu"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    ASSIGN_OR_RETURN(Shape y, AddOutputShape(in));
    return std::vector<Shape>{y};
  }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(in[0]->shape());
    ctx_->Run(fwd_, {{DNNL_ARG_SRC_0, Mem(*ctx_, md_, in[0])},
                     {DNNL_ARG_SRC_1, Mem(*ctx_, md_, in[1])},
                     {DNNL_ARG_DST, Mem(*ctx_, md_, out[0])}});
  }

  bool InputsShareOneGradient() const override { return true; }

  // Every input's gradient asked for gets it (a caller that shares one asks for one).
  void Backward(Ins, Ins out, Ins grad_out, Outs grad_in) override {
    const Tensor* first = nullptr;
    for (Tensor* g : grad_in) {
      if (g == nullptr) continue;
      if (first != nullptr) {
        std::memcpy(g->raw(), first->raw(), first->nbytes());
        continue;
      }
      ctx_->Run(bwd_, {{DNNL_ARG_DST, Mem(*ctx_, md_, out[0])},
                       {DNNL_ARG_DIFF_DST, Mem(*ctx_, md_, grad_out[0])},
                       {DNNL_ARG_DIFF_SRC, Mem(*ctx_, md_, g)}});
      first = g;
    }
  }

 private:
  void Build(const Shape& x) {
    if (cache_.Matches(x, Mode::kTrain)) return;
    md_ = ctx_->ActivationMd(x);
    dnnl::post_ops relu;
    relu.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(relu);
    fwd_ = dnnl::binary(dnnl::binary::primitive_desc(
        dnnl::binary::desc(dnnl::algorithm::binary_add, md_, md_, md_), attr, ctx_->engine));
    const auto algo = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc hint(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algo, md_, 0.f, 0.f),
        ctx_->engine);
    bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
        dnnl::eltwise_backward::desc(algo, md_, md_, 0.f, 0.f), ctx_->engine, hint));
    cache_.Set(x, Mode::kTrain);
  }

  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;  // one pair of primitives serves both modes
  dnnl::memory::desc md_;
  dnnl::primitive fwd_, bwd_;
};

class ReluOnednn final : public ReluFrame {
 public:
  explicit ReluOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  // y (oneDNN's ReLU backward from its output: y > 0 where x > 0), so that x's memory serves
  // other tensors once the forward ran.
  BackwardReads ReadsInBackward() const override { return {false, true}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape());
    ctx_->Run(fwd_, {{DNNL_ARG_SRC, Mem(*ctx_, md_, in[0])},
                     {DNNL_ARG_DST, Mem(*ctx_, md_, out[0])}});
  }

  void Backward(Ins, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    ctx_->Run(bwd_, {{DNNL_ARG_DST, Mem(*ctx_, md_, out[0])},
                     {DNNL_ARG_DIFF_DST, Mem(*ctx_, md_, grad_out[0])},
                     {DNNL_ARG_DIFF_SRC, Mem(*ctx_, md_, grad_in[0])}});
  }

 private:
  void Build(Mode mode, const Shape& x) {
    if (cache_.Matches(x, mode)) return;
    md_ = ctx_->ActivationMd(x);
    const auto algo = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc fwd_pd(
        dnnl::eltwise_forward::desc(Prop(mode), algo, md_, 0.f, 0.f), ctx_->engine);
    fwd_ = dnnl::eltwise_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
          dnnl::eltwise_backward::desc(algo, md_, md_, 0.f, 0.f), ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;
  dnnl::memory::desc md_;
  dnnl::primitive fwd_, bwd_;
};

// oneDNN has no dropout primitive: a masked scale over the elements. The mask is drawn in
// plain order, as every backend draws it, and reordered as the activation is held.
class DropoutOnednn final : public DropoutFrame {
 public:
  DropoutOnednn(std::shared_ptr<Ctx> ctx, DropoutSpec spec)
      : DropoutFrame(spec), ctx_(std::move(ctx)) {}

  // The mask only.
  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    if (mode == Mode::kEval) {
      std::memcpy(out[0]->raw(), in[0]->raw(), in[0]->nbytes());
      return;
    }
    const Shape& x = in[0]->shape();
    const bool blocked = ctx_->Blocked(x);
    std::vector<uint8_t>& drawn = blocked ? plain_mask_ : mask_;
    drawn.resize(static_cast<size_t>(in[0]->numel()));
    mask_.resize(drawn.size());
    DropoutMask(spec_, calls_++, absl::MakeSpan(drawn));
    if (blocked) {
      ctx_->Reorder(Md(x, tag::nchw, dt::u8), plain_mask_.data(), ctx_->ActivationMd(x, dt::u8),
                    mask_.data());
    }
    Scale(in[0]->data<float>(), out[0]->data<float>());
  }

  void Backward(Ins, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] != nullptr) Scale(grad_out[0]->data<float>(), grad_in[0]->data<float>());
  }

 private:
  void Scale(const float* x, float* y) const {
    const float keep_scale = 1.0f / (1.0f - spec_.p);
    for (size_t i = 0; i < mask_.size(); ++i) y[i] = mask_[i] ? x[i] * keep_scale : 0.0f;
  }

  std::shared_ptr<Ctx> ctx_;
  uint64_t calls_ = 0;
  std::vector<uint8_t> mask_;        // of the last kTrain Forward, as the activation is held
  std::vector<uint8_t> plain_mask_;  // drawn in plain order, for a blocked activation
};

}  // namespace

std::unique_ptr<Op> MakeAdd(std::shared_ptr<Ctx> ctx) {
  return std::make_unique<AddOnednn>(std::move(ctx));
}
std::unique_ptr<Op> MakeAddRelu(std::shared_ptr<Ctx> ctx) {
  return std::make_unique<AddReluOnednn>(std::move(ctx));
}
std::unique_ptr<Op> MakeRelu(std::shared_ptr<Ctx> ctx) {
  return std::make_unique<ReluOnednn>(std::move(ctx));
}
std::unique_ptr<Op> MakeDropout(std::shared_ptr<Ctx> ctx, const DropoutSpec& spec) {
  return std::make_unique<DropoutOnednn>(std::move(ctx), spec);
}
}  // namespace onednn
}  // namespace cohort
