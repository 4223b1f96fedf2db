// The oneDNN backend's the classifier: linear layers and softmax cross-entropy.

#include <cmath>
#include <memory>

#include "trainer/base/check.h"
#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/cpu/onednn_ops.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace onednn {
namespace {

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

std::unique_ptr<Op> MakeLinear(std::shared_ptr<Ctx> ctx) {
  return std::make_unique<LinearOnednn>(std::move(ctx));
}
std::unique_ptr<Op> MakeSoftmaxCrossEntropy(std::shared_ptr<Ctx> ctx) {
  return std::make_unique<SoftmaxCrossEntropyOnednn>(std::move(ctx));
}
}  // namespace onednn
}  // namespace cohort
