#ifndef COHORT_TRAINER_OPS_CPU_ONEDNN_CONTEXT_H_
#define COHORT_TRAINER_OPS_CPU_ONEDNN_CONTEXT_H_

// What the oneDNN backend's ops share (private to //trainer/ops/cpu:onednn_backend): the
// engine and stream with the activation layout (OnednnBackend::Context), memory descriptors,
// a primitive cache by shape, and arguments staged in a primitive's chosen layout.

#include <chrono>
#include <cstring>
#include <unordered_map>

#include "absl/types/span.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace onednn {

using dt = dnnl::memory::data_type;
// Roles of the convolutions' shared staging buffers: an argument shaped as x, w or y.
enum StagingRole { kSource, kWeights, kDestination };
using tag = dnnl::memory::format_tag;

inline dnnl::memory::dims Dims(const Shape& s) {
  return dnnl::memory::dims(s.dims().begin(), s.dims().end());
}

inline dnnl::memory::desc Md(const Shape& s, tag t, dt type = dt::f32) {
  return dnnl::memory::desc(Dims(s), type, t);
}

inline tag PlainTag(int rank) { return rank == 4 ? tag::nchw : rank == 2 ? tag::nc : tag::x; }

// The channel block of the layout oneDNN's convolutions pick for activations on this CPU (a
// 3×3 convolution of 64 channels, as the ResNets have), or 0 when they pick a plain one.
inline int ConvolutionChannelBlock(const dnnl::engine& engine) {
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

}  // namespace onednn

struct OnednnBackend::Context {
  using dt = onednn::dt;
  using tag = onednn::tag;

  explicit Context(ActivationLayout layout)
      : block(layout == ActivationLayout::kBlocked ? onednn::ConvolutionChannelBlock(engine)
                                                   : 0) {}

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
    if (!Blocked(s)) return onednn::Md(s, onednn::PlainTag(s.rank()), type);
    return onednn::Md(s, block == 16 ? tag::nChw16c : tag::nChw8c, type);
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
    Reorder(ActivationMd(t->shape()), t->raw(), onednn::Md(t->shape(), tag::nchw), scratch->raw());
    return scratch;
  }
  // Brings a plain activation into held form in *t (nothing to do when both are t).
  void Hold(const Tensor& plain, Tensor* t) {
    if (&plain == t) return;
    if (!Blocked(t->shape())) {
      std::memcpy(t->raw(), plain.raw(), plain.nbytes());
      return;
    }
    Reorder(onednn::Md(t->shape(), tag::nchw), plain.raw(), ActivationMd(t->shape()), t->raw());
  }
};

namespace onednn {

using Ctx = OnednnBackend::Context;
using Ins = absl::Span<const Tensor* const>;
using Outs = absl::Span<Tensor* const>;

// Wraps a host tensor (no copy) for one primitive call.
inline dnnl::memory Mem(const Ctx& ctx, const dnnl::memory::desc& md, const Tensor* t) {
  return dnnl::memory(md, ctx.engine, const_cast<void*>(t->raw()));
}

// A buffer of oneDNN's (a workspace, an argument staged in another layout) in `bytes`, memory
// from the CPU allocator, which counts it in a step's peak: grown to hold md, never shrunk.
inline dnnl::memory HeldMemory(const Ctx& ctx, const dnnl::memory::desc& md, Tensor* bytes) {
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

inline dnnl::prop_kind Prop(Mode mode) {
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

}  // namespace onednn
}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_CPU_ONEDNN_CONTEXT_H_
