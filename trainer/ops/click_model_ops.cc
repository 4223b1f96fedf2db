#include "trainer/ops/click_model_ops.h"

#include <algorithm>
#include <cmath>

#include "trainer/base/check.h"

namespace cohort {
namespace {

using Ins = absl::Span<const Tensor* const>;
using Outs = absl::Span<Tensor* const>;

class HostDotInteractionOp final : public Op {
 public:
  absl::string_view name() const override { return "dot_interaction"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    if (in.size() != 1) {
      return absl::InvalidArgumentError("dot_interaction: expects 1 input");
    }
    absl::StatusOr<Shape> y = DotInteractionOutputShape(in[0]);
    if (!y.ok()) return y.status();
    return std::vector<Shape>{*y};
  }
  BackwardReads ReadsInBackward() const override { return {true, false}; }

  void Forward(Mode, Ins in, Outs out) override {
    if (in[0]->dtype() == DType::kF64) return ForwardOf<double>(*in[0], out[0]);
    ForwardOf<float>(*in[0], out[0]);
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    if (in[0]->dtype() == DType::kF64) return BackwardOf<double>(*in[0], *grad_out[0], grad_in[0]);
    BackwardOf<float>(*in[0], *grad_out[0], grad_in[0]);
  }

 private:
  template <typename T>
  static void ForwardOf(const Tensor& x, Tensor* y) {
    const int64_t n = x.shape()[0], f = x.shape()[1], d = x.shape()[2];
    const T* xs = x.data<T>();
    T* out = y->data<T>();
    for (int64_t s = 0; s < n; ++s) {
      const T* v = xs + s * f * d;
      for (int64_t i = 1; i < f; ++i) {
        for (int64_t j = 0; j < i; ++j) {
          T dot = 0;
          for (int64_t k = 0; k < d; ++k) dot += v[i * d + k] * v[j * d + k];
          *out++ = dot;
        }
      }
    }
  }

  template <typename T>
  static void BackwardOf(const Tensor& x, const Tensor& dy, Tensor* dx) {
    const int64_t n = x.shape()[0], f = x.shape()[1], d = x.shape()[2];
    const T* xs = x.data<T>();
    const T* g = dy.data<T>();
    absl::Span<T> dxs = dx->span<T>();
    std::fill(dxs.begin(), dxs.end(), T{0});
    for (int64_t s = 0; s < n; ++s) {
      const T* v = xs + s * f * d;
      T* dv = dxs.data() + s * f * d;
      for (int64_t i = 1; i < f; ++i) {
        for (int64_t j = 0; j < i; ++j) {
          const T gp = *g++;
          for (int64_t k = 0; k < d; ++k) {
            dv[i * d + k] += gp * v[j * d + k];
            dv[j * d + k] += gp * v[i * d + k];
          }
        }
      }
    }
  }
};

class HostBinaryCrossEntropyOp final : public Op {
 public:
  absl::string_view name() const override { return "binary_cross_entropy"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    if (in.size() != 2) {
      return absl::InvalidArgumentError("binary_cross_entropy: expects 2 inputs");
    }
    absl::StatusOr<Shape> loss = BinaryCrossEntropyOutputShape(in[0], in[1]);
    if (!loss.ok()) return loss.status();
    return std::vector<Shape>{*loss};
  }
  BackwardReads ReadsInBackward() const override { return {true, false}; }

  void Forward(Mode, Ins in, Outs out) override {
    if (in[0]->dtype() == DType::kF64) return ForwardOf<double>(in, out[0]);
    ForwardOf<float>(in, out[0]);
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    if (in[0]->dtype() == DType::kF64) return BackwardOf<double>(in, *grad_out[0], grad_in[0]);
    BackwardOf<float>(in, *grad_out[0], grad_in[0]);
  }

 private:
  static int32_t Label(const Tensor& labels, int64_t i) {
    const int32_t y = labels.data<int32_t>()[i];
    COHORT_CHECK(y == 0 || y == 1, "binary_cross_entropy: label %ld is %d", i, y);
    return y;
  }

  template <typename T>
  static void ForwardOf(Ins in, Tensor* out) {
    const int64_t n = in[0]->shape()[0];
    const T* z = in[0]->data<T>();
    double sum = 0;  // the mean of N terms: summed in double whatever T is
    for (int64_t i = 0; i < n; ++i) {
      const double zi = z[i];
      sum += std::max(zi, 0.0) - zi * Label(*in[1], i) + std::log1p(std::exp(-std::abs(zi)));
    }
    out->data<T>()[0] = static_cast<T>(n > 0 ? sum / static_cast<double>(n) : 0.0);
  }

  template <typename T>
  static void BackwardOf(Ins in, const Tensor& grad_out, Tensor* dz) {
    const int64_t n = in[0]->shape()[0];
    const T* z = in[0]->data<T>();
    const T scale = grad_out.data<T>()[0] / static_cast<T>(n);
    T* g = dz->data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const T sigmoid = T{1} / (T{1} + std::exp(-z[i]));
      g[i] = scale * (sigmoid - static_cast<T>(Label(*in[1], i)));
    }
  }
};

}  // namespace

std::unique_ptr<Op> MakeHostDotInteraction() { return std::make_unique<HostDotInteractionOp>(); }
std::unique_ptr<Op> MakeHostBinaryCrossEntropy() {
  return std::make_unique<HostBinaryCrossEntropyOp>();
}

}  // namespace cohort
