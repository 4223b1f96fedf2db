#include "trainer/ops/reference/reference_backend.h"

#include <cmath>
#include <limits>

#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

using Ins = absl::Span<const Tensor* const>;
using Outs = absl::Span<Tensor* const>;

const double* D(const Tensor* t) { return t->data<double>(); }
double* D(Tensor* t) { return t->data<double>(); }

class Conv2dRef final : public Op {
 public:
  explicit Conv2dRef(Conv2dSpec spec) : s_(spec) {}
  absl::string_view name() const override { return "conv2d"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 3));
    ASSIGN_OR_RETURN(Shape y, Conv2dOutputShape(s_, in[0], in[1], in[2]));
    return std::vector<Shape>{y};
  }

  // Visits every (n, o, oh, ow, c, kh, kw) whose input pixel lies inside the image.
  template <typename F>
  void ForEachTap(const Shape& x, const Shape& w, const Shape& y, F f) const {
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t o = 0; o < w[0]; ++o)
        for (int64_t oh = 0; oh < y[2]; ++oh)
          for (int64_t ow = 0; ow < y[3]; ++ow)
            for (int64_t c = 0; c < w[1]; ++c)
              for (int64_t kh = 0; kh < w[2]; ++kh)
                for (int64_t kw = 0; kw < w[3]; ++kw) {
                  const int64_t ih = oh * s_.stride - s_.padding + kh;
                  const int64_t iw = ow * s_.stride - s_.padding + kw;
                  if (ih < 0 || ih >= x[2] || iw < 0 || iw >= x[3]) continue;
                  f(((n * x[1] + c) * x[2] + ih) * x[3] + iw,      // x index
                    ((o * w[1] + c) * w[2] + kh) * w[3] + kw,      // w index
                    ((n * y[1] + o) * y[2] + oh) * y[3] + ow);     // y index
                }
  }

  void Forward(Mode, Ins in, Outs out) override {
    const Shape& y = out[0]->shape();
    const double* x = D(in[0]);
    const double* w = D(in[1]);
    const double* b = D(in[2]);
    double* yd = D(out[0]);
    for (int64_t i = 0; i < out[0]->numel(); ++i) yd[i] = b[(i / (y[2] * y[3])) % y[1]];
    ForEachTap(in[0]->shape(), in[1]->shape(), y,
               [&](int64_t xi, int64_t wi, int64_t yi) { yd[yi] += x[xi] * w[wi]; });
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    const Shape& y = out[0]->shape();
    const double* x = D(in[0]);
    const double* w = D(in[1]);
    const double* dy = D(grad_out[0]);
    for (Tensor* g : grad_in)
      if (g != nullptr) g->SetZero();
    double* dx = grad_in[0] ? D(grad_in[0]) : nullptr;
    double* dw = grad_in[1] ? D(grad_in[1]) : nullptr;
    double* db = grad_in[2] ? D(grad_in[2]) : nullptr;
    ForEachTap(in[0]->shape(), in[1]->shape(), y, [&](int64_t xi, int64_t wi, int64_t yi) {
      if (dx) dx[xi] += dy[yi] * w[wi];
      if (dw) dw[wi] += dy[yi] * x[xi];
    });
    if (db)
      for (int64_t i = 0; i < out[0]->numel(); ++i) db[(i / (y[2] * y[3])) % y[1]] += dy[i];
  }

 private:
  Conv2dSpec s_;
};

class MaxPool2dRef final : public Op {
 public:
  explicit MaxPool2dRef(Pool2dSpec spec) : s_(spec) {}
  absl::string_view name() const override { return "max_pool2d"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 1));
    ASSIGN_OR_RETURN(Shape y, Pool2dOutputShape(name(), s_, in[0]));
    return std::vector<Shape>{y};
  }

  // Index into x of the first maximum of the window behind output element yi (padding never wins).
  int64_t ArgMax(const Tensor& xt, const Shape& y, int64_t yi) const {
    const Shape& x = xt.shape();
    const double* xd = D(&xt);
    const int64_t ow = yi % y[3], oh = (yi / y[3]) % y[2], nc = yi / (y[2] * y[3]);
    int64_t best = -1;
    for (int64_t kh = 0; kh < s_.kernel; ++kh)
      for (int64_t kw = 0; kw < s_.kernel; ++kw) {
        const int64_t ih = oh * s_.stride - s_.padding + kh;
        const int64_t iw = ow * s_.stride - s_.padding + kw;
        if (ih < 0 || ih >= x[2] || iw < 0 || iw >= x[3]) continue;
        const int64_t xi = (nc * x[2] + ih) * x[3] + iw;
        if (best < 0 || xd[xi] > xd[best]) best = xi;
      }
    return best;
  }

  void Forward(Mode, Ins in, Outs out) override {
    double* y = D(out[0]);
    for (int64_t i = 0; i < out[0]->numel(); ++i) y[i] = D(in[0])[ArgMax(*in[0], out[0]->shape(), i)];
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    grad_in[0]->SetZero();
    double* dx = D(grad_in[0]);
    for (int64_t i = 0; i < out[0]->numel(); ++i)
      dx[ArgMax(*in[0], out[0]->shape(), i)] += D(grad_out[0])[i];
  }

 private:
  Pool2dSpec s_;
};

class ReluRef final : public Op {
 public:
  absl::string_view name() const override { return "relu"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 1));
    return std::vector<Shape>{in[0]};
  }
  void Forward(Mode, Ins in, Outs out) override {
    for (int64_t i = 0; i < in[0]->numel(); ++i) D(out[0])[i] = std::max(0.0, D(in[0])[i]);
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    for (int64_t i = 0; i < in[0]->numel(); ++i)
      D(grad_in[0])[i] = D(in[0])[i] > 0 ? D(grad_out[0])[i] : 0.0;
  }
};

class LinearRef final : public Op {
 public:
  absl::string_view name() const override { return "linear"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 3));
    ASSIGN_OR_RETURN(Shape y, LinearOutputShape(in[0], in[1], in[2]));
    return std::vector<Shape>{y};
  }
  void Forward(Mode, Ins in, Outs out) override {
    const int64_t n = in[0]->shape()[0], k = in[0]->shape()[1], m = in[1]->shape()[0];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < m; ++o) {
        double acc = D(in[2])[o];
        for (int64_t j = 0; j < k; ++j) acc += D(in[0])[i * k + j] * D(in[1])[o * k + j];
        D(out[0])[i * m + o] = acc;
      }
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    const int64_t n = in[0]->shape()[0], k = in[0]->shape()[1], m = in[1]->shape()[0];
    for (Tensor* g : grad_in)
      if (g != nullptr) g->SetZero();
    const double* dy = D(grad_out[0]);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < m; ++o) {
        for (int64_t j = 0; j < k; ++j) {
          if (grad_in[0]) D(grad_in[0])[i * k + j] += dy[i * m + o] * D(in[1])[o * k + j];
          if (grad_in[1]) D(grad_in[1])[o * k + j] += dy[i * m + o] * D(in[0])[i * k + j];
        }
        if (grad_in[2]) D(grad_in[2])[o] += dy[i * m + o];
      }
  }
};

class SoftmaxCrossEntropyRef final : public Op {
 public:
  absl::string_view name() const override { return "softmax_cross_entropy"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 2));
    ASSIGN_OR_RETURN(Shape y, SoftmaxCrossEntropyOutputShape(in[0], in[1]));
    return std::vector<Shape>{y};
  }

  // Row i's softmax into p (length K); returns log(sum(exp(z - max))) + max.
  static double LogSumExp(const double* z, int64_t k) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < k; ++j) m = std::max(m, z[j]);
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(z[j] - m);
    return m + std::log(s);
  }

  void Forward(Mode, Ins in, Outs out) override {
    const int64_t n = in[0]->shape()[0], k = in[0]->shape()[1];
    const int32_t* labels = in[1]->data<int32_t>();
    double loss = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double* z = D(in[0]) + i * k;
      COHORT_CHECK(labels[i] >= 0 && labels[i] < k, "label %d outside [0, %ld)", labels[i], k);
      loss += LogSumExp(z, k) - z[labels[i]];
    }
    D(out[0])[0] = loss / n;
  }

  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    const int64_t n = in[0]->shape()[0], k = in[0]->shape()[1];
    const double scale = D(grad_out[0])[0] / n;
    for (int64_t i = 0; i < n; ++i) {
      const double* z = D(in[0]) + i * k;
      const double lse = LogSumExp(z, k);
      for (int64_t j = 0; j < k; ++j) {
        const double onehot = j == in[1]->data<int32_t>()[i] ? 1.0 : 0.0;
        D(grad_in[0])[i * k + j] = scale * (std::exp(z[j] - lse) - onehot);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Op> ReferenceBackend::Conv2d(const Conv2dSpec& spec) {
  return std::make_unique<Conv2dRef>(spec);
}
std::unique_ptr<Op> ReferenceBackend::MaxPool2d(const Pool2dSpec& spec) {
  return std::make_unique<MaxPool2dRef>(spec);
}
std::unique_ptr<Op> ReferenceBackend::Relu() { return std::make_unique<ReluRef>(); }
std::unique_ptr<Op> ReferenceBackend::Linear() { return std::make_unique<LinearRef>(); }
std::unique_ptr<Op> ReferenceBackend::SoftmaxCrossEntropy() {
  return std::make_unique<SoftmaxCrossEntropyRef>();
}

}  // namespace cohort
