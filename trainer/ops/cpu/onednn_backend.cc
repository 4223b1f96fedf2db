#include "trainer/ops/cpu/onednn_backend.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "oneapi/dnnl/dnnl.hpp"
#include "trainer/base/status_macros.h"
#include "trainer/ops/op_frames.h"

namespace cohort {

struct OnednnBackend::Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  double primitive_seconds = 0;

  // Runs a primitive to completion, adding its time to primitive_seconds.
  void Run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
    const auto start = std::chrono::steady_clock::now();
    p.execute(stream, args);
    stream.wait();
    primitive_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

namespace {

using Ctx = OnednnBackend::Context;
using Ins = absl::Span<const Tensor* const>;
using Outs = absl::Span<Tensor* const>;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::memory::dims Dims(const Shape& s) { return dnnl::memory::dims(s.dims().begin(), s.dims().end()); }

dnnl::memory::desc Md(const Shape& s, tag t) { return dnnl::memory::desc(Dims(s), dt::f32, t); }

// Wraps a host tensor (no copy) for one primitive call.
dnnl::memory Mem(const Ctx& ctx, const dnnl::memory::desc& md, const Tensor* t) {
  return dnnl::memory(md, ctx.engine, const_cast<void*>(t->raw()));
}

tag ActivationTag(int rank) { return rank == 4 ? tag::nchw : rank == 2 ? tag::nc : tag::x; }

// Rebuilds an op's primitives only when the input shape or mode changes (the first step,
// the evaluation batch), so the steady-state step creates nothing.
class ShapeCache {
 public:
  bool Matches(const Shape& s, Mode m) const { return valid_ && s == shape_ && m == mode_; }
  void Set(const Shape& s, Mode m) {
    shape_ = s;
    mode_ = m;
    valid_ = true;
  }

 private:
  Shape shape_;
  Mode mode_ = Mode::kTrain;
  bool valid_ = false;
};

dnnl::prop_kind Prop(Mode mode) {
  return mode == Mode::kTrain ? dnnl::prop_kind::forward_training
                              : dnnl::prop_kind::forward_inference;
}

// A tensor argument of a primitive that picked its own layout (format_tag::any): the plain
// tensor itself when the layouts agree, else a buffer in the primitive's layout and a reorder
// between the two, so ops still take and give plain tensors.
class StagedArg {
 public:
  void Build(const Ctx& ctx, const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen,
             bool is_input) {
    plain_ = plain;
    staged_ = plain != chosen;
    if (!staged_) return;
    buffer_ = dnnl::memory(chosen, ctx.engine);
    reorder_ = is_input ? dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, plain, ctx.engine, chosen))
                        : dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, chosen, ctx.engine, plain));
  }
  // An input: the memory to pass, with t's values in the primitive's layout.
  dnnl::memory In(Ctx& ctx, const Tensor* t) {
    dnnl::memory m = Mem(ctx, plain_, t);
    if (!staged_) return m;
    ctx.Run(reorder_, {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, buffer_}});
    return buffer_;
  }
  // An input already brought into the primitive's layout by In (with the same layout) since t
  // last changed: the memory to pass, without reordering again.
  dnnl::memory Staged(const Ctx& ctx, const Tensor* t) const {
    return staged_ ? buffer_ : Mem(ctx, plain_, t);
  }
  // An output: the memory the primitive writes; Finish brings it into t.
  dnnl::memory Out(const Ctx& ctx, Tensor* t) const { return staged_ ? buffer_ : Mem(ctx, plain_, t); }
  void Finish(Ctx& ctx, Tensor* t) {
    if (staged_) ctx.Run(reorder_, {{DNNL_ARG_FROM, buffer_}, {DNNL_ARG_TO, Mem(ctx, plain_, t)}});
  }

 private:
  dnnl::memory::desc plain_;
  bool staged_ = false;
  dnnl::memory buffer_;
  dnnl::primitive reorder_;
};

// Convolutions run in the blocked layouts oneDNN picks (several times faster than plain NCHW
// here, reorders included); inputs and outputs stay plain.
class Conv2dOnednn final : public Conv2dFrame {
 public:
  Conv2dOnednn(std::shared_ptr<Ctx> ctx, Conv2dSpec spec)
      : Conv2dFrame(spec), ctx_(std::move(ctx)) {}

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
    const dnnl::memory::desc x_md = Md(x, tag::nchw), w_md = Md(w, tag::oihw),
                             y_md = Md(y, tag::nchw);
    const dnnl::memory::desc x_any(Dims(x), dt::f32, tag::any), w_any(Dims(w), dt::f32, tag::any),
        y_any(Dims(y), dt::f32, tag::any);
    // A zero descriptor turns the bias off.
    b_md_ = spec_.bias ? Md(Shape{w[0]}, tag::x) : dnnl::memory::desc();
    const dnnl::memory::dims strides{spec_.stride, spec_.stride}, pad{spec_.padding, spec_.padding};
    const auto algo = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc fwd_pd(
        dnnl::convolution_forward::desc(Prop(mode), algo, x_any, w_any, b_md_, y_any, strides,
                                        pad, pad),
        ctx_->engine);
    fwd_ = dnnl::convolution_forward(fwd_pd);
    fwd_x_.Build(*ctx_, x_md, fwd_pd.src_desc(), true);
    fwd_w_.Build(*ctx_, w_md, fwd_pd.weights_desc(), true);
    fwd_y_.Build(*ctx_, y_md, fwd_pd.dst_desc(), false);
    if (mode == Mode::kTrain) {
      dnnl::convolution_backward_data::primitive_desc data_pd(
          dnnl::convolution_backward_data::desc(algo, x_any, w_any, y_any, strides, pad, pad),
          ctx_->engine, fwd_pd);
      bwd_data_ = dnnl::convolution_backward_data(data_pd);
      data_dy_.Build(*ctx_, y_md, data_pd.diff_dst_desc(), true);
      data_w_.Build(*ctx_, w_md, data_pd.weights_desc(), true);
      data_dx_.Build(*ctx_, x_md, data_pd.diff_src_desc(), false);
      dnnl::convolution_backward_weights::primitive_desc weights_pd(
          dnnl::convolution_backward_weights::desc(algo, x_any, w_any, b_md_, y_any, strides,
                                                   pad, pad),
          ctx_->engine, fwd_pd);
      bwd_weights_ = dnnl::convolution_backward_weights(weights_pd);
      weights_x_same_as_fwd_ = weights_pd.src_desc() == fwd_pd.src_desc();
      weights_dy_same_as_data_ = weights_pd.diff_dst_desc() == data_pd.diff_dst_desc();
      weights_x_.Build(*ctx_, x_md, weights_pd.src_desc(), true);
      weights_dy_.Build(*ctx_, y_md, weights_pd.diff_dst_desc(), true);
      weights_dw_.Build(*ctx_, w_md, weights_pd.diff_weights_desc(), false);
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
  bool weights_x_same_as_fwd_ = false;
  bool weights_dy_same_as_data_ = false;
};

// Max, average (padding counted) and global average pooling. Global pooling is average
// pooling with the whole image as the window; its (N, C, 1, 1) output is the (N, C) tensor.
class Pool2dOnednn final : public Pool2dFrame {
 public:
  Pool2dOnednn(std::shared_ptr<Ctx> ctx, PoolKind kind, Pool2dSpec spec)
      : Pool2dFrame(kind, spec), ctx_(std::move(ctx)) {}

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
    x_md_ = Md(x, tag::nchw);
    y_md_ = Md(Shape{x[0], x[1], y_hw[0], y_hw[1]}, tag::nchw);
    const auto algo = kind_ == PoolKind::kMax ? dnnl::algorithm::pooling_max
                                          : dnnl::algorithm::pooling_avg_include_padding;
    dnnl::pooling_forward::primitive_desc fwd_pd(
        dnnl::pooling_forward::desc(Prop(mode), algo, x_md_, y_md_, strides, kernel, pad_l, pad_r),
        ctx_->engine);
    fwd_ = dnnl::pooling_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      // Max-pool backward needs the forward's argmax record (the workspace).
      if (kind_ == PoolKind::kMax) {
        workspace_ = dnnl::memory(fwd_pd.workspace_desc(), ctx_->engine);
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
  dnnl::memory workspace_;
  dnnl::primitive fwd_, bwd_;
};

// Batch norm with scale (γ) and shift (β). oneDNN computes the batch statistics in kTrain
// and reads the running ones in kEval (use_global_stats); it does not keep running
// statistics, so the op folds each batch's into them.
class BatchNormOnednn final : public BatchNormFrame {
 public:
  BatchNormOnednn(std::shared_ptr<Ctx> ctx, BatchNormSpec spec)
      : BatchNormFrame(spec),
        ctx_(std::move(ctx)),
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

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    Build(mode, x);
    const bool train = mode == Mode::kTrain;
    ctx_->Run(fwd_, {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                     {DNNL_ARG_SCALE, Mem(*ctx_, c_md_, in[1])},
                     {DNNL_ARG_SHIFT, Mem(*ctx_, c_md_, in[2])},
                     {DNNL_ARG_MEAN, Mem(*ctx_, c_md_, train ? &mean_ : &running_mean_)},
                     {DNNL_ARG_VARIANCE, Mem(*ctx_, c_md_, train ? &var_ : &running_var_)},
                     {DNNL_ARG_DST, Mem(*ctx_, x_md_, out[0])}});
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
    ctx_->Run(bwd_, {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                     {DNNL_ARG_MEAN, Mem(*ctx_, c_md_, &mean_)},
                     {DNNL_ARG_VARIANCE, Mem(*ctx_, c_md_, &var_)},
                     {DNNL_ARG_DIFF_DST, Mem(*ctx_, x_md_, grad_out[0])},
                     {DNNL_ARG_SCALE, Mem(*ctx_, c_md_, in[1])},
                     // oneDNN 2.6 asks for the shift in backward too when use_shift is set.
                     {DNNL_ARG_SHIFT, Mem(*ctx_, c_md_, in[2])},
                     {DNNL_ARG_DIFF_SRC, Mem(*ctx_, x_md_, grad_in[0])},
                     {DNNL_ARG_DIFF_SCALE, Mem(*ctx_, c_md_, grad_in[1])},
                     {DNNL_ARG_DIFF_SHIFT, Mem(*ctx_, c_md_, grad_in[2])}});
  }

 private:
  void Build(Mode mode, const Shape& x) {
    if (cache_.Matches(x, mode)) return;
    x_md_ = Md(x, tag::nchw);
    c_md_ = Md(Shape{spec_.channels}, tag::x);
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (mode == Mode::kEval) flags = flags | dnnl::normalization_flags::use_global_stats;
    dnnl::batch_normalization_forward::primitive_desc fwd_pd(
        dnnl::batch_normalization_forward::desc(Prop(mode), x_md_, spec_.eps, flags), ctx_->engine);
    fwd_ = dnnl::batch_normalization_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      bwd_ = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
          dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, x_md_, x_md_,
                                                   spec_.eps, flags),
          ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;
  Tensor running_mean_, running_var_;
  Tensor mean_, var_;  // (C) batch statistics of the last kTrain Forward (variance biased)
  dnnl::memory::desc x_md_, c_md_;
  dnnl::primitive fwd_, bwd_;
};

// y = a + b as a binary primitive. The gradient reaches both inputs unchanged (copies).
class AddOnednn final : public AddFrame {
 public:
  explicit AddOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    if (!cache_.Matches(x, Mode::kEval)) {
      md_ = Md(x, ActivationTag(x.rank()));
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

// oneDNN has no dropout primitive: a masked scale over the elements.
class DropoutOnednn final : public DropoutFrame {
 public:
  explicit DropoutOnednn(DropoutSpec spec) : DropoutFrame(spec) {}

  void Forward(Mode mode, Ins in, Outs out) override {
    if (mode == Mode::kEval) {
      std::memcpy(out[0]->raw(), in[0]->raw(), in[0]->nbytes());
      return;
    }
    mask_.resize(static_cast<size_t>(in[0]->numel()));
    DropoutMask(spec_, calls_++, absl::MakeSpan(mask_));
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

  uint64_t calls_ = 0;
  std::vector<uint8_t> mask_;  // of the last kTrain Forward
};

// The option-A ResNet shortcut is a strided copy into the middle channels: a plain loop.
class SubsamplePadOnednn final : public SubsamplePadFrame {
 public:
  explicit SubsamplePadOnednn(SubsamplePadSpec spec) : SubsamplePadFrame(spec) {}

  void Forward(Mode, Ins in, Outs out) override {
    out[0]->SetZero();
    const Shape &x = in[0]->shape(), &y = out[0]->shape();
    const float* src = in[0]->data<float>();
    float* dst = out[0]->data<float>();
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t c = 0; c < x[1]; ++c) {
        const float* xp = src + (n * x[1] + c) * x[2] * x[3];
        float* yp = dst + (n * y[1] + c + spec_.pad_channels) * y[2] * y[3];
        for (int64_t h = 0; h < y[2]; ++h)
          for (int64_t w = 0; w < y[3]; ++w) yp[h * y[3] + w] = xp[(h * x[3] + w) * spec_.stride];
      }
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    grad_in[0]->SetZero();
    const Shape &x = in[0]->shape(), &y = out[0]->shape();
    const float* dy = grad_out[0]->data<float>();
    float* dx = grad_in[0]->data<float>();
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t c = 0; c < x[1]; ++c) {
        float* xp = dx + (n * x[1] + c) * x[2] * x[3];
        const float* yp = dy + (n * y[1] + c + spec_.pad_channels) * y[2] * y[3];
        for (int64_t h = 0; h < y[2]; ++h)
          for (int64_t w = 0; w < y[3]; ++w) xp[(h * x[3] + w) * spec_.stride] = yp[h * y[3] + w];
      }
  }
};

class ReluOnednn final : public ReluFrame {
 public:
  explicit ReluOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape());
    ctx_->Run(fwd_, {{DNNL_ARG_SRC, Mem(*ctx_, md_, in[0])}, {DNNL_ARG_DST, Mem(*ctx_, md_, out[0])}});
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    ctx_->Run(bwd_, {{DNNL_ARG_SRC, Mem(*ctx_, md_, in[0])},
                                {DNNL_ARG_DIFF_DST, Mem(*ctx_, md_, grad_out[0])},
                                {DNNL_ARG_DIFF_SRC, Mem(*ctx_, md_, grad_in[0])}});
  }

 private:
  void Build(Mode mode, const Shape& x) {
    if (cache_.Matches(x, mode)) return;
    md_ = Md(x, ActivationTag(x.rank()));
    dnnl::eltwise_forward::primitive_desc fwd_pd(
        dnnl::eltwise_forward::desc(Prop(mode), dnnl::algorithm::eltwise_relu, md_, 0.f, 0.f),
        ctx_->engine);
    fwd_ = dnnl::eltwise_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
          dnnl::eltwise_backward::desc(dnnl::algorithm::eltwise_relu, md_, md_, 0.f, 0.f),
          ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;
  dnnl::memory::desc md_;
  dnnl::primitive fwd_, bwd_;
};

class LinearOnednn final : public LinearFrame {
 public:
  explicit LinearOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape(), in[1]->shape());
    ctx_->Run(fwd_, {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                                {DNNL_ARG_WEIGHTS, Mem(*ctx_, w_md_, in[1])},
                                {DNNL_ARG_BIAS, Mem(*ctx_, b_md_, in[2])},
                                {DNNL_ARG_DST, Mem(*ctx_, y_md_, out[0])}});
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] != nullptr) {
      ctx_->Run(bwd_data_, {{DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                                       {DNNL_ARG_WEIGHTS, Mem(*ctx_, w_md_, in[1])},
                                       {DNNL_ARG_DIFF_SRC, Mem(*ctx_, x_md_, grad_in[0])}});
    }
    if (grad_in[1] != nullptr) {
      COHORT_CHECK(grad_in[2] != nullptr, "linear computes weight and bias gradients together");
      ctx_->Run(bwd_weights_, {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                            {DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                            {DNNL_ARG_DIFF_WEIGHTS, Mem(*ctx_, w_md_, grad_in[1])},
                            {DNNL_ARG_DIFF_BIAS, Mem(*ctx_, b_md_, grad_in[2])}});
    }
  }

 private:
  void Build(Mode mode, const Shape& x, const Shape& w) {
    if (cache_.Matches(x, mode)) return;
    x_md_ = Md(x, tag::nc);
    w_md_ = Md(w, tag::oi);
    b_md_ = Md(Shape{w[0]}, tag::x);
    y_md_ = Md(Shape{x[0], w[0]}, tag::nc);
    dnnl::inner_product_forward::primitive_desc fwd_pd(
        dnnl::inner_product_forward::desc(Prop(mode), x_md_, w_md_, b_md_, y_md_), ctx_->engine);
    fwd_ = dnnl::inner_product_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      bwd_data_ = dnnl::inner_product_backward_data(
          dnnl::inner_product_backward_data::primitive_desc(
              dnnl::inner_product_backward_data::desc(x_md_, w_md_, y_md_), ctx_->engine, fwd_pd));
      bwd_weights_ = dnnl::inner_product_backward_weights(
          dnnl::inner_product_backward_weights::primitive_desc(
              dnnl::inner_product_backward_weights::desc(x_md_, w_md_, b_md_, y_md_),
              ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;
  dnnl::memory::desc x_md_, w_md_, b_md_, y_md_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
};

// log-softmax is a oneDNN primitive; the label gather (loss) and softmax − one-hot
// (gradient) are O(N·K) loops on its output.
class SoftmaxCrossEntropyOnednn final : public SoftmaxCrossEntropyFrame {
 public:
  explicit SoftmaxCrossEntropyOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& z = in[0]->shape();
    if (!cache_.Matches(z, mode)) {
      md_ = Md(z, tag::nc);
      fwd_ = dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc(
          dnnl::logsoftmax_forward::desc(Prop(mode), md_, 1), ctx_->engine));
      log_p_.Resize(z);
      cache_.Set(z, mode);
    }
    ctx_->Run(fwd_, {{DNNL_ARG_SRC, Mem(*ctx_, md_, in[0])}, {DNNL_ARG_DST, Mem(*ctx_, md_, &log_p_)}});
    const int64_t n = z[0], k = z[1];
    const int32_t* labels = in[1]->data<int32_t>();
    const float* lp = log_p_.data<float>();
    double loss = 0;
    for (int64_t i = 0; i < n; ++i) {
      COHORT_CHECK(labels[i] >= 0 && labels[i] < k, "label %d outside [0, %ld)", labels[i], k);
      loss -= lp[i * k + labels[i]];
    }
    out[0]->data<float>()[0] = static_cast<float>(loss / n);
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    const int64_t n = in[0]->shape()[0], k = in[0]->shape()[1];
    const float scale = grad_out[0]->data<float>()[0] / static_cast<float>(n);
    const int32_t* labels = in[1]->data<int32_t>();
    const float* lp = log_p_.data<float>();
    float* dz = grad_in[0]->data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        dz[i * k + j] = scale * (std::exp(lp[i * k + j]) - (j == labels[i] ? 1.f : 0.f));
  }

 private:
  std::shared_ptr<Ctx> ctx_;
  ShapeCache cache_;
  dnnl::memory::desc md_;
  dnnl::primitive fwd_;
  Tensor log_p_{Shape{0, 0}};  // (N, K) log-probabilities of the last forward
};

}  // namespace

OnednnBackend::OnednnBackend(int threads)
    : ctx_(std::make_shared<Context>()), threads_(threads) {}
OnednnBackend::~OnednnBackend() = default;

// oneDNN's OpenMP runtime sizes each parallel region by the calling thread's own setting.
void OnednnBackend::BindCallingThread() {
  if (threads_ > 0) omp_set_num_threads(threads_);
}

std::unique_ptr<Op> OnednnBackend::Conv2d(const Conv2dSpec& spec) {
  return std::make_unique<Conv2dOnednn>(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::MaxPool2d(const Pool2dSpec& spec) {
  return std::make_unique<Pool2dOnednn>(ctx_, PoolKind::kMax, spec);
}
std::unique_ptr<Op> OnednnBackend::AvgPool2d(const Pool2dSpec& spec) {
  return std::make_unique<Pool2dOnednn>(ctx_, PoolKind::kAvg, spec);
}
std::unique_ptr<Op> OnednnBackend::GlobalAvgPool() {
  return std::make_unique<Pool2dOnednn>(ctx_, PoolKind::kGlobalAvg, Pool2dSpec{});
}
std::unique_ptr<Op> OnednnBackend::BatchNorm(const BatchNormSpec& spec) {
  return std::make_unique<BatchNormOnednn>(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::Add() { return std::make_unique<AddOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::Dropout(const DropoutSpec& spec) {
  return std::make_unique<DropoutOnednn>(spec);
}
std::unique_ptr<Op> OnednnBackend::SubsamplePad(const SubsamplePadSpec& spec) {
  return std::make_unique<SubsamplePadOnednn>(spec);
}
double OnednnBackend::primitive_seconds() const { return ctx_->primitive_seconds; }
std::unique_ptr<Op> OnednnBackend::Relu() { return std::make_unique<ReluOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::Linear() { return std::make_unique<LinearOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::SoftmaxCrossEntropy() {
  return std::make_unique<SoftmaxCrossEntropyOnednn>(ctx_);
}

}  // namespace cohort
