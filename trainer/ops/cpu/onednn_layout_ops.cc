// The oneDNN backend's ops that move elements between layouts: the ResNet shortcut, flatten, concatenation.

#include <memory>
#include <vector>

#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/cpu/onednn_ops.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace onednn {
namespace {

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

}  // namespace

std::unique_ptr<Op> MakeSubsamplePad(std::shared_ptr<Ctx> ctx, const SubsamplePadSpec& spec) {
  return std::make_unique<SubsamplePadOnednn>(std::move(ctx), spec);
}
std::unique_ptr<Op> MakeFlatten(std::shared_ptr<Ctx> ctx, std::unique_ptr<Op> copy) {
  return std::make_unique<FlattenOnednn>(std::move(ctx), std::move(copy));
}
std::unique_ptr<Op> MakeConcat(std::shared_ptr<Ctx> ctx, std::unique_ptr<Op> copies,
                               std::unique_ptr<Op> plain_copies) {
  return std::make_unique<ConcatOnednn>(std::move(ctx), std::move(copies),
                                        std::move(plain_copies));
}
}  // namespace onednn
}  // namespace cohort
