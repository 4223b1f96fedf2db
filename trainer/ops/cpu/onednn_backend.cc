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

namespace {

using dt = dnnl::memory::data_type;
// Roles of the convolutions' shared staging buffers: an argument shaped as x, w or y.
enum StagingRole { kSource, kWeights, kDestination };
using tag = dnnl::memory::format_tag;

dnnl::memory::dims Dims(const Shape& s) { return dnnl::memory::dims(s.dims().begin(), s.dims().end()); }

dnnl::memory::desc Md(const Shape& s, tag t, dt type = dt::f32) {
  return dnnl::memory::desc(Dims(s), type, t);
}

tag PlainTag(int rank) { return rank == 4 ? tag::nchw : rank == 2 ? tag::nc : tag::x; }

// The channel block of the layout oneDNN's convolutions pick for activations on this CPU (a
// 3×3 convolution of 64 channels, as the ResNets have), or 0 when they pick a plain one.
int ConvolutionChannelBlock(const dnnl::engine& engine) {
  const dnnl::memory::desc any({8, 64, 16, 16}, dt::f32, tag::any);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, any,
                                      dnnl::memory::desc({64, 64, 3, 3}, dt::f32, tag::any),
                                      dnnl::memory::desc(), any, {1, 1}, {1, 1}, {1, 1}),
      engine);
  for (int block : {16, 8}) {
    if (pd.src_desc() == dnnl::memory::desc({8, 64, 16, 16}, dt::f32,
                                            block == 16 ? tag::nChw16c : tag::nChw8c)) {
      return block;
    }
  }
  return 0;
}

}  // namespace

struct OnednnBackend::Context {
  explicit Context(ActivationLayout layout)
      : block(layout == ActivationLayout::kBlocked ? ConvolutionChannelBlock(engine) : 0) {}

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  const int block;  // channels a block of a held activation holds; 0: all plain
  double primitive_seconds = 0;
  // Convolution arguments staged in the layouts the primitives chose, by role (Conv2dOnednn):
  // every convolution of the context shares them, one running at a time.
  Tensor staging[3] = {Tensor(Shape{0}), Tensor(Shape{0}), Tensor(Shape{0})};

  bool Blocked(const Shape& s) const { return block > 0 && s.rank() == 4 && s[1] % block == 0; }

  // How an activation of this shape is held (a 2-D or 1-D one plain).
  dnnl::memory::desc ActivationMd(const Shape& s, dt type = dt::f32) const {
    if (!Blocked(s)) return Md(s, PlainTag(s.rank()), type);
    return Md(s, block == 16 ? tag::nChw16c : tag::nChw8c, type);
  }

  // Runs a primitive to completion, adding its time to primitive_seconds.
  void Run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
    const auto start = std::chrono::steady_clock::now();
    p.execute(stream, args);
    stream.wait();
    primitive_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Copies src (laid out as from) into dst (laid out as to). The primitive comes from
  // oneDNN's primitive cache after the first call with these descriptors.
  void Reorder(const dnnl::memory::desc& from, const void* src, const dnnl::memory::desc& to,
               void* dst) {
    const dnnl::reorder r(dnnl::reorder::primitive_desc(engine, from, engine, to));
    Run(r, {{DNNL_ARG_FROM, dnnl::memory(from, engine, const_cast<void*>(src))},
            {DNNL_ARG_TO, dnnl::memory(to, engine, dst)}});
  }

  // An activation's plain form: t itself where it is held plain, else reordered into *scratch.
  const Tensor* Plain(const Tensor* t, Tensor* scratch) {
    if (!Blocked(t->shape())) return t;
    scratch->Resize(t->shape());
    Reorder(ActivationMd(t->shape()), t->raw(), Md(t->shape(), tag::nchw), scratch->raw());
    return scratch;
  }
  // Brings a plain activation into held form in *t (nothing to do when both are t).
  void Hold(const Tensor& plain, Tensor* t) {
    if (&plain == t) return;
    if (!Blocked(t->shape())) {
      std::memcpy(t->raw(), plain.raw(), plain.nbytes());
      return;
    }
    Reorder(Md(t->shape(), tag::nchw), plain.raw(), ActivationMd(t->shape()), t->raw());
  }
};

namespace {

using Ctx = OnednnBackend::Context;
using Ins = absl::Span<const Tensor* const>;
using Outs = absl::Span<Tensor* const>;

// Wraps a host tensor (no copy) for one primitive call.
dnnl::memory Mem(const Ctx& ctx, const dnnl::memory::desc& md, const Tensor* t) {
  return dnnl::memory(md, ctx.engine, const_cast<void*>(t->raw()));
}

// A buffer of oneDNN's (a workspace, an argument staged in another layout) in `bytes`, memory
// from the CPU allocator, which counts it in a step's peak: grown to hold md, never shrunk.
dnnl::memory HeldMemory(const Ctx& ctx, const dnnl::memory::desc& md, Tensor* bytes) {
  const auto words = static_cast<int64_t>((md.get_size() + 3) / 4);
  if (bytes->numel() < words) bytes->Resize(Shape{words});
  return Mem(ctx, md, bytes);
}

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

// A tensor argument of a primitive that picked its own layout (format_tag::any): the tensor
// itself when that is the layout it is held in, else a buffer in the primitive's layout and a
// reorder between the two, so that ops take and give tensors as the backend holds them. The
// buffer is the argument's own where its values must outlive the call, else one the context's
// convolutions share (Ctx::staging).
class StagedArg {
 public:
  void Build(const Ctx& ctx, const dnnl::memory::desc& held, const dnnl::memory::desc& chosen,
             bool is_input, Tensor* buffer) {
    held_ = held;
    chosen_ = chosen;
    staged_ = held != chosen;
    if (!staged_) return;
    buffer_ = buffer;
    HeldMemory(ctx, chosen, buffer_);  // grows it; Buffer wraps it at each use
    const dnnl::memory::desc& from = is_input ? held : chosen;
    const dnnl::memory::desc& to = is_input ? chosen : held;
    reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(ctx.engine, from, ctx.engine, to));
  }
  // An input: the memory to pass, with t's values in the primitive's layout.
  dnnl::memory In(Ctx& ctx, const Tensor* t) {
    dnnl::memory m = Mem(ctx, held_, t);
    if (!staged_) return m;
    ctx.Run(reorder_, {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, Buffer(ctx)}});
    return Buffer(ctx);
  }
  // An input already brought into the primitive's layout by In (with the same layout) since t
  // last changed: the memory to pass, without reordering again.
  dnnl::memory Staged(const Ctx& ctx, const Tensor* t) const {
    return staged_ ? Buffer(ctx) : Mem(ctx, held_, t);
  }
  // An output: the memory the primitive writes; Finish brings it into t.
  dnnl::memory Out(const Ctx& ctx, Tensor* t) const {
    return staged_ ? Buffer(ctx) : Mem(ctx, held_, t);
  }
  void Finish(Ctx& ctx, Tensor* t) {
    if (!staged_) return;
    ctx.Run(reorder_, {{DNNL_ARG_FROM, Buffer(ctx)}, {DNNL_ARG_TO, Mem(ctx, held_, t)}});
  }

 private:
  // Made at each use: a shared buffer may have grown (moved) since Build.
  dnnl::memory Buffer(const Ctx& ctx) const { return Mem(ctx, chosen_, buffer_); }

  dnnl::memory::desc held_, chosen_;
  bool staged_ = false;
  Tensor* buffer_ = nullptr;
  dnnl::primitive reorder_;
};

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

// Where element (n, c, h, w) of an activation (N, C, H, W) lies as the backend holds it:
// channel blocks of `block` (1: plain NCHW), each (H, W, block).
class HeldIndex {
 public:
  HeldIndex(const Shape& s, int block) : blocks_(s[1] / block), h_(s[2]), w_(s[3]), block_(block) {}
  int64_t operator()(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return (((n * blocks_ + c / block_) * h_ + h) * w_ + w) * block_ + c % block_;
  }

 private:
  int64_t blocks_, h_, w_, block_;
};

// The option-A ResNet shortcut is a strided copy into the middle channels: a loop over the
// input's elements, in whichever layouts input and output are held.
class SubsamplePadOnednn final : public SubsamplePadFrame {
 public:
  SubsamplePadOnednn(std::shared_ptr<Ctx> ctx, SubsamplePadSpec spec)
      : SubsamplePadFrame(spec), ctx_(std::move(ctx)) {}

  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Forward(Mode, Ins in, Outs out) override {
    out[0]->SetZero();
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    ForEachPair(in[0]->shape(), out[0]->shape(), [&](int64_t xi, int64_t yi) { y[yi] = x[xi]; });
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    grad_in[0]->SetZero();
    const float* dy = grad_out[0]->data<float>();
    float* dx = grad_in[0]->data<float>();
    ForEachPair(in[0]->shape(), out[0]->shape(), [&](int64_t xi, int64_t yi) { dx[xi] = dy[yi]; });
  }

 private:
  // Calls f(offset in x, offset in y) for every element the shortcut copies.
  template <typename F>
  void ForEachPair(const Shape& x, const Shape& y, F f) const {
    const HeldIndex xi(x, ctx_->Blocked(x) ? ctx_->block : 1);
    const HeldIndex yi(y, ctx_->Blocked(y) ? ctx_->block : 1);
    const int64_t s = spec_.stride, p = spec_.pad_channels;
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t c = 0; c < x[1]; ++c)
        for (int64_t h = 0; h < y[2]; ++h)
          for (int64_t w = 0; w < y[3]; ++w) f(xi(n, c, h * s, w * s), yi(n, c + p, h, w));
  }

  std::shared_ptr<Ctx> ctx_;
};

// An op standing for `inner`, a host op written for plain tensors, on the activations as this
// backend holds them: its name and output shapes are inner's.
class WrapsOp : public Op {
 public:
  explicit WrapsOp(std::unique_ptr<Op> inner) : inner_(std::move(inner)) {}

  absl::string_view name() const override { return inner_->name(); }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    return inner_->OutputShapes(in);
  }

 protected:
  Op& inner() { return *inner_; }

 private:
  std::unique_ptr<Op> inner_;
};

// Flattening a blocked activation is a reorder into its plain form, which (N, C·H·W) is; a
// plain one is the Backend's copy.
class FlattenOnednn final : public WrapsOp {
 public:
  FlattenOnednn(std::shared_ptr<Ctx> ctx, std::unique_ptr<Op> copy)
      : WrapsOp(std::move(copy)), ctx_(std::move(ctx)) {}

  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    if (!ctx_->Blocked(x)) return inner().Forward(mode, in, out);
    ctx_->Reorder(ctx_->ActivationMd(x), in[0]->raw(), Md(x, tag::nchw), out[0]->raw());
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    const Shape& x = in[0]->shape();
    if (!ctx_->Blocked(x)) return inner().Backward(in, out, grad_out, grad_in);
    if (grad_in[0] == nullptr) return;
    ctx_->Reorder(Md(x, tag::nchw), grad_out[0]->raw(), ctx_->ActivationMd(x), grad_in[0]->raw());
  }

 private:
  std::shared_ptr<Ctx> ctx_;
};

// Runs a host op written for plain tensors (a concatenation of parts held in different
// layouts) on activations as the backend holds them: blocked inputs and output
// gradients are reordered into plain scratch tensors first, and blocked outputs and input
// gradients back from them.
class OnPlainForms final : public WrapsOp {
 public:
  OnPlainForms(std::shared_ptr<Ctx> ctx, std::unique_ptr<Op> op)
      : WrapsOp(std::move(op)), ctx_(std::move(ctx)) {}

  void Forward(Mode mode, Ins in, Outs out) override {
    in_.resize(in.size());
    out_.resize(out.size());
    plain_in_ = PlainForms(in, absl::MakeSpan(in_));
    plain_out_ = Scratch(out, absl::MakeSpan(out_));
    inner().Forward(mode, plain_in_, plain_out_);
    for (size_t k = 0; k < out.size(); ++k) ctx_->Hold(*plain_out_[k], out[k]);
  }

  // Follows Forward on the same inputs: their plain forms and the outputs' are still here.
  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    dy_.resize(grad_out.size());
    dx_.resize(grad_in.size());
    const std::vector<const Tensor*> plain_dy = PlainForms(grad_out, absl::MakeSpan(dy_));
    std::vector<Tensor*> plain_dx = Scratch(grad_in, absl::MakeSpan(dx_));
    const std::vector<const Tensor*> plain_out(plain_out_.begin(), plain_out_.end());
    inner().Backward(plain_in_, plain_out, plain_dy, plain_dx);
    for (size_t i = 0; i < grad_in.size(); ++i) {
      if (grad_in[i] != nullptr) ctx_->Hold(*plain_dx[i], grad_in[i]);
    }
  }

 private:
  std::vector<const Tensor*> PlainForms(Ins ts, absl::Span<Tensor> scratch) {
    std::vector<const Tensor*> plain;
    for (size_t i = 0; i < ts.size(); ++i) plain.push_back(ctx_->Plain(ts[i], &scratch[i]));
    return plain;
  }
  // Where the op writes each of ts: a scratch tensor for a blocked one, else itself.
  std::vector<Tensor*> Scratch(Outs ts, absl::Span<Tensor> scratch) {
    std::vector<Tensor*> plain;
    for (size_t i = 0; i < ts.size(); ++i) {
      Tensor* t = ts[i];
      if (t != nullptr && ctx_->Blocked(t->shape())) {
        scratch[i].Resize(t->shape());
        t = &scratch[i];
      }
      plain.push_back(t);
    }
    return plain;
  }

  std::shared_ptr<Ctx> ctx_;
  std::vector<Tensor> in_, out_, dy_, dx_;  // plain forms of blocked tensors
  std::vector<const Tensor*> plain_in_;
  std::vector<Tensor*> plain_out_;
};

// Concatenation along channels is block copies in either layout when every part is held as
// the output is (blocked parts fill whole channel blocks of it); otherwise it runs on the
// plain forms.
class ConcatOnednn final : public ConcatFrame {
 public:
  ConcatOnednn(std::shared_ptr<Ctx> ctx, std::unique_ptr<Op> copies,
               std::unique_ptr<Op> plain_copies)
      : ctx_(std::move(ctx)),
        copies_(std::move(copies)),
        on_plain_forms_(ctx_, std::move(plain_copies)) {}

  // Slices of the output's gradient, whatever the layouts.
  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    bool same = true;
    for (const Tensor* x : in) same = same && ctx_->Blocked(x->shape()) == ctx_->Blocked(out[0]->shape());
    op_ = same ? copies_.get() : static_cast<Op*>(&on_plain_forms_);
    op_->Forward(mode, in, out);
  }
  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    op_->Backward(in, out, grad_out, grad_in);
  }

 private:
  std::shared_ptr<Ctx> ctx_;
  std::unique_ptr<Op> copies_;
  OnPlainForms on_plain_forms_;
  Op* op_ = nullptr;  // the one the last Forward ran
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

class LinearOnednn final : public LinearFrame {
 public:
  explicit LinearOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}

  // x for the weights' gradient.
  BackwardReads ReadsInBackward() const override { return {true, false}; }

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
  return std::make_unique<BatchNormOnednn>(ctx_, spec, /*relu=*/false);
}
std::unique_ptr<Op> OnednnBackend::Add() { return std::make_unique<AddOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::Concat() {
  return std::make_unique<ConcatOnednn>(ctx_, Backend::Concat(), Backend::Concat());
}
std::unique_ptr<Op> OnednnBackend::Flatten() {
  return std::make_unique<FlattenOnednn>(ctx_, Backend::Flatten());
}
std::unique_ptr<Op> OnednnBackend::Dropout(const DropoutSpec& spec) {
  return std::make_unique<DropoutOnednn>(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::SubsamplePad(const SubsamplePadSpec& spec) {
  return std::make_unique<SubsamplePadOnednn>(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::FuseRelu(const Op& op) {
  if (op.name() == "batch_norm") {
    return std::make_unique<BatchNormOnednn>(ctx_, static_cast<const BatchNormFrame&>(op).spec(),
                                             /*relu=*/true);
  }
  if (op.name() == "add") return std::make_unique<AddReluOnednn>(ctx_);
  return nullptr;
}

double OnednnBackend::primitive_seconds() const { return ctx_->primitive_seconds; }
std::unique_ptr<Op> OnednnBackend::Relu() { return std::make_unique<ReluOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::Linear() { return std::make_unique<LinearOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::SoftmaxCrossEntropy() {
  return std::make_unique<SoftmaxCrossEntropyOnednn>(ctx_);
}

}  // namespace cohort
