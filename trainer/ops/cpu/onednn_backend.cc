#include "trainer/ops/cpu/onednn_backend.h"

#include <cmath>
#include <optional>
#include <unordered_map>

#include "oneapi/dnnl/dnnl.hpp"
#include "trainer/base/status_macros.h"

namespace cohort {

struct OnednnBackend::Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
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

class Conv2dOnednn final : public Op {
 public:
  Conv2dOnednn(std::shared_ptr<Ctx> ctx, Conv2dSpec spec) : ctx_(std::move(ctx)), s_(spec) {}
  absl::string_view name() const override { return "conv2d"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 3));
    ASSIGN_OR_RETURN(Shape y, Conv2dOutputShape(s_, in[0], in[1], in[2]));
    return std::vector<Shape>{y};
  }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape(), in[1]->shape(), out[0]->shape());
    fwd_.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                                {DNNL_ARG_WEIGHTS, Mem(*ctx_, w_md_, in[1])},
                                {DNNL_ARG_BIAS, Mem(*ctx_, b_md_, in[2])},
                                {DNNL_ARG_DST, Mem(*ctx_, y_md_, out[0])}});
    ctx_->stream.wait();
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] != nullptr) {
      bwd_data_.execute(ctx_->stream, {{DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                                       {DNNL_ARG_WEIGHTS, Mem(*ctx_, w_md_, in[1])},
                                       {DNNL_ARG_DIFF_SRC, Mem(*ctx_, x_md_, grad_in[0])}});
    }
    if (grad_in[1] != nullptr) {
      COHORT_CHECK(grad_in[2] != nullptr, "conv2d computes weight and bias gradients together");
      bwd_weights_.execute(ctx_->stream,
                           {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                            {DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                            {DNNL_ARG_DIFF_WEIGHTS, Mem(*ctx_, w_md_, grad_in[1])},
                            {DNNL_ARG_DIFF_BIAS, Mem(*ctx_, b_md_, grad_in[2])}});
    }
    ctx_->stream.wait();
  }

 private:
  void Build(Mode mode, const Shape& x, const Shape& w, const Shape& y) {
    if (cache_.Matches(x, mode)) return;
    x_md_ = Md(x, tag::nchw);
    w_md_ = Md(w, tag::oihw);
    b_md_ = Md(Shape{w[0]}, tag::x);
    y_md_ = Md(y, tag::nchw);
    const dnnl::memory::dims strides{s_.stride, s_.stride}, pad{s_.padding, s_.padding};
    const auto algo = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc fwd_pd(
        dnnl::convolution_forward::desc(Prop(mode), algo, x_md_, w_md_, b_md_, y_md_, strides,
                                        pad, pad),
        ctx_->engine);
    fwd_ = dnnl::convolution_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      bwd_data_ = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(
          dnnl::convolution_backward_data::desc(algo, x_md_, w_md_, y_md_, strides, pad, pad),
          ctx_->engine, fwd_pd));
      bwd_weights_ = dnnl::convolution_backward_weights(
          dnnl::convolution_backward_weights::primitive_desc(
              dnnl::convolution_backward_weights::desc(algo, x_md_, w_md_, b_md_, y_md_, strides,
                                                       pad, pad),
              ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  Conv2dSpec s_;
  ShapeCache cache_;
  dnnl::memory::desc x_md_, w_md_, b_md_, y_md_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
};

class MaxPool2dOnednn final : public Op {
 public:
  MaxPool2dOnednn(std::shared_ptr<Ctx> ctx, Pool2dSpec spec) : ctx_(std::move(ctx)), s_(spec) {}
  absl::string_view name() const override { return "max_pool2d"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 1));
    ASSIGN_OR_RETURN(Shape y, Pool2dOutputShape(name(), s_, in[0]));
    return std::vector<Shape>{y};
  }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape(), out[0]->shape());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                                               {DNNL_ARG_DST, Mem(*ctx_, y_md_, out[0])}};
    if (mode == Mode::kTrain) args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    fwd_.execute(ctx_->stream, args);
    ctx_->stream.wait();
  }

  void Backward(Ins, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    bwd_.execute(ctx_->stream, {{DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                                {DNNL_ARG_DIFF_SRC, Mem(*ctx_, x_md_, grad_in[0])},
                                {DNNL_ARG_WORKSPACE, workspace_}});
    ctx_->stream.wait();
  }

 private:
  void Build(Mode mode, const Shape& x, const Shape& y) {
    if (cache_.Matches(x, mode)) return;
    x_md_ = Md(x, tag::nchw);
    y_md_ = Md(y, tag::nchw);
    const dnnl::memory::dims strides{s_.stride, s_.stride}, kernel{s_.kernel, s_.kernel},
        pad{s_.padding, s_.padding};
    dnnl::pooling_forward::primitive_desc fwd_pd(
        dnnl::pooling_forward::desc(Prop(mode), dnnl::algorithm::pooling_max, x_md_, y_md_,
                                    strides, kernel, pad, pad),
        ctx_->engine);
    fwd_ = dnnl::pooling_forward(fwd_pd);
    if (mode == Mode::kTrain) {
      // Backward needs the forward's argmax record (the workspace).
      workspace_ = dnnl::memory(fwd_pd.workspace_desc(), ctx_->engine);
      bwd_ = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(
          dnnl::pooling_backward::desc(dnnl::algorithm::pooling_max, x_md_, y_md_, strides,
                                       kernel, pad, pad),
          ctx_->engine, fwd_pd));
    }
    cache_.Set(x, mode);
  }

  std::shared_ptr<Ctx> ctx_;
  Pool2dSpec s_;
  ShapeCache cache_;
  dnnl::memory::desc x_md_, y_md_;
  dnnl::memory workspace_;
  dnnl::primitive fwd_, bwd_;
};

class ReluOnednn final : public Op {
 public:
  explicit ReluOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}
  absl::string_view name() const override { return "relu"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 1));
    return std::vector<Shape>{in[0]};
  }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape());
    fwd_.execute(ctx_->stream,
                 {{DNNL_ARG_SRC, Mem(*ctx_, md_, in[0])}, {DNNL_ARG_DST, Mem(*ctx_, md_, out[0])}});
    ctx_->stream.wait();
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    bwd_.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(*ctx_, md_, in[0])},
                                {DNNL_ARG_DIFF_DST, Mem(*ctx_, md_, grad_out[0])},
                                {DNNL_ARG_DIFF_SRC, Mem(*ctx_, md_, grad_in[0])}});
    ctx_->stream.wait();
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

class LinearOnednn final : public Op {
 public:
  explicit LinearOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}
  absl::string_view name() const override { return "linear"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 3));
    ASSIGN_OR_RETURN(Shape y, LinearOutputShape(in[0], in[1], in[2]));
    return std::vector<Shape>{y};
  }

  void Forward(Mode mode, Ins in, Outs out) override {
    Build(mode, in[0]->shape(), in[1]->shape());
    fwd_.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                                {DNNL_ARG_WEIGHTS, Mem(*ctx_, w_md_, in[1])},
                                {DNNL_ARG_BIAS, Mem(*ctx_, b_md_, in[2])},
                                {DNNL_ARG_DST, Mem(*ctx_, y_md_, out[0])}});
    ctx_->stream.wait();
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] != nullptr) {
      bwd_data_.execute(ctx_->stream, {{DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                                       {DNNL_ARG_WEIGHTS, Mem(*ctx_, w_md_, in[1])},
                                       {DNNL_ARG_DIFF_SRC, Mem(*ctx_, x_md_, grad_in[0])}});
    }
    if (grad_in[1] != nullptr) {
      COHORT_CHECK(grad_in[2] != nullptr, "linear computes weight and bias gradients together");
      bwd_weights_.execute(ctx_->stream,
                           {{DNNL_ARG_SRC, Mem(*ctx_, x_md_, in[0])},
                            {DNNL_ARG_DIFF_DST, Mem(*ctx_, y_md_, grad_out[0])},
                            {DNNL_ARG_DIFF_WEIGHTS, Mem(*ctx_, w_md_, grad_in[1])},
                            {DNNL_ARG_DIFF_BIAS, Mem(*ctx_, b_md_, grad_in[2])}});
    }
    ctx_->stream.wait();
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
class SoftmaxCrossEntropyOnednn final : public Op {
 public:
  explicit SoftmaxCrossEntropyOnednn(std::shared_ptr<Ctx> ctx) : ctx_(std::move(ctx)) {}
  absl::string_view name() const override { return "softmax_cross_entropy"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 2));
    ASSIGN_OR_RETURN(Shape y, SoftmaxCrossEntropyOutputShape(in[0], in[1]));
    return std::vector<Shape>{y};
  }

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& z = in[0]->shape();
    if (!cache_.Matches(z, mode)) {
      md_ = Md(z, tag::nc);
      fwd_ = dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc(
          dnnl::logsoftmax_forward::desc(Prop(mode), md_, 1), ctx_->engine));
      log_p_.Resize(z);
      cache_.Set(z, mode);
    }
    fwd_.execute(ctx_->stream,
                 {{DNNL_ARG_SRC, Mem(*ctx_, md_, in[0])}, {DNNL_ARG_DST, Mem(*ctx_, md_, &log_p_)}});
    ctx_->stream.wait();
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

OnednnBackend::OnednnBackend() : ctx_(std::make_shared<Context>()) {}
OnednnBackend::~OnednnBackend() = default;

std::unique_ptr<Op> OnednnBackend::Conv2d(const Conv2dSpec& spec) {
  return std::make_unique<Conv2dOnednn>(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::MaxPool2d(const Pool2dSpec& spec) {
  return std::make_unique<MaxPool2dOnednn>(ctx_, spec);
}
std::unique_ptr<Op> OnednnBackend::Relu() { return std::make_unique<ReluOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::Linear() { return std::make_unique<LinearOnednn>(ctx_); }
std::unique_ptr<Op> OnednnBackend::SoftmaxCrossEntropy() {
  return std::make_unique<SoftmaxCrossEntropyOnednn>(ctx_);
}

}  // namespace cohort
