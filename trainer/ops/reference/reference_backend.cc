#include "trainer/ops/reference/reference_backend.h"

#include <cmath>
#include <limits>

#include "trainer/base/status_macros.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace {

using Ins = absl::Span<const Tensor* const>;
using Outs = absl::Span<Tensor* const>;

const double* D(const Tensor* t) { return t->data<double>(); }
double* D(Tensor* t) { return t->data<double>(); }

class Conv2dRef final : public Conv2dFrame {
 public:
  explicit Conv2dRef(Conv2dSpec spec) : Conv2dFrame(spec) {}

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
                  const int64_t ih = oh * spec_.stride - spec_.padding + kh;
                  const int64_t iw = ow * spec_.stride - spec_.padding + kw;
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
    double* yd = D(out[0]);
    for (int64_t i = 0; i < out[0]->numel(); ++i) {
      yd[i] = spec_.bias ? D(in[2])[(i / (y[2] * y[3])) % y[1]] : 0.0;
    }
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
    double* db = spec_.bias && grad_in[2] ? D(grad_in[2]) : nullptr;
    ForEachTap(in[0]->shape(), in[1]->shape(), y, [&](int64_t xi, int64_t wi, int64_t yi) {
      if (dx) dx[xi] += dy[yi] * w[wi];
      if (dw) dw[wi] += dy[yi] * x[xi];
    });
    if (db)
      for (int64_t i = 0; i < out[0]->numel(); ++i) db[(i / (y[2] * y[3])) % y[1]] += dy[i];
  }
};

class MaxPool2dRef final : public Pool2dFrame {
 public:
  explicit MaxPool2dRef(Pool2dSpec spec) : Pool2dFrame(PoolKind::kMax, spec) {}

  // Index into x of the first maximum of the window behind output element yi (padding never wins).
  int64_t ArgMax(const Tensor& xt, const Shape& y, int64_t yi) const {
    const Shape& x = xt.shape();
    const double* xd = D(&xt);
    const int64_t ow = yi % y[3], oh = (yi / y[3]) % y[2], nc = yi / (y[2] * y[3]);
    int64_t best = -1;
    for (int64_t kh = 0; kh < spec_.kernel; ++kh)
      for (int64_t kw = 0; kw < spec_.kernel; ++kw) {
        const int64_t ih = oh * spec_.stride - spec_.padding + kh;
        const int64_t iw = ow * spec_.stride - spec_.padding + kw;
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
};

// Averages over kernel×kernel windows; padded positions count as zeros (PyTorch's
// count_include_pad=True).
class AvgPool2dRef final : public Pool2dFrame {
 public:
  explicit AvgPool2dRef(Pool2dSpec spec) : Pool2dFrame(PoolKind::kAvg, spec) {}

  // Calls f(x index, y index) for every in-image tap of every window.
  template <typename F>
  void ForEachTap(const Shape& x, const Shape& y, F f) const {
    for (int64_t nc = 0; nc < x[0] * x[1]; ++nc)
      for (int64_t oh = 0; oh < y[2]; ++oh)
        for (int64_t ow = 0; ow < y[3]; ++ow)
          for (int64_t kh = 0; kh < spec_.kernel; ++kh)
            for (int64_t kw = 0; kw < spec_.kernel; ++kw) {
              const int64_t ih = oh * spec_.stride - spec_.padding + kh;
              const int64_t iw = ow * spec_.stride - spec_.padding + kw;
              if (ih < 0 || ih >= x[2] || iw < 0 || iw >= x[3]) continue;
              f((nc * x[2] + ih) * x[3] + iw, (nc * y[2] + oh) * y[3] + ow);
            }
  }

  void Forward(Mode, Ins in, Outs out) override {
    out[0]->SetZero();
    const double area = spec_.kernel * spec_.kernel;
    ForEachTap(in[0]->shape(), out[0]->shape(),
               [&](int64_t xi, int64_t yi) { D(out[0])[yi] += D(in[0])[xi] / area; });
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    grad_in[0]->SetZero();
    const double area = spec_.kernel * spec_.kernel;
    ForEachTap(in[0]->shape(), out[0]->shape(),
               [&](int64_t xi, int64_t yi) { D(grad_in[0])[xi] += D(grad_out[0])[yi] / area; });
  }
};

class GlobalAvgPoolRef final : public Pool2dFrame {
 public:
  GlobalAvgPoolRef() : Pool2dFrame(PoolKind::kGlobalAvg, Pool2dSpec{}) {}
  void Forward(Mode, Ins in, Outs out) override {
    const int64_t area = in[0]->shape()[2] * in[0]->shape()[3];
    for (int64_t nc = 0; nc < out[0]->numel(); ++nc) {
      double sum = 0;
      for (int64_t j = 0; j < area; ++j) sum += D(in[0])[nc * area + j];
      D(out[0])[nc] = sum / area;
    }
  }
  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    const int64_t area = in[0]->shape()[2] * in[0]->shape()[3];
    for (int64_t nc = 0; nc < out[0]->numel(); ++nc)
      for (int64_t j = 0; j < area; ++j) D(grad_in[0])[nc * area + j] = D(grad_out[0])[nc] / area;
  }
};

class BatchNormRef final : public BatchNormFrame {
 public:
  explicit BatchNormRef(BatchNormSpec spec)
      : BatchNormFrame(spec),
        running_mean_(Shape{spec.channels}, DType::kF64),
        running_var_(Shape{spec.channels}, DType::kF64),
        mean_(Shape{spec.channels}, DType::kF64),
        inv_std_(Shape{spec.channels}, DType::kF64) {
    running_mean_.SetZero();
    for (double& v : running_var_.span<double>()) v = 1.0;
  }
  std::vector<OpState> State() override {
    return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
  }

  // Calls f(element index) for every element of channel c.
  template <typename F>
  static void ForChannel(const Shape& x, int64_t c, F f) {
    const int64_t area = x[2] * x[3];
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t j = 0; j < area; ++j) f((n * x[1] + c) * area + j);
  }

  void Forward(Mode mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    const double count = static_cast<double>(x[0] * x[2] * x[3]);
    for (int64_t c = 0; c < x[1]; ++c) {
      double mean = D(&running_mean_)[c], var = D(&running_var_)[c];
      if (mode == Mode::kTrain) {
        double sum = 0, sq = 0;
        ForChannel(x, c, [&](int64_t i) { sum += D(in[0])[i]; });
        mean = sum / count;
        ForChannel(x, c, [&](int64_t i) { sq += (D(in[0])[i] - mean) * (D(in[0])[i] - mean); });
        var = sq / count;
        const double unbiased = count > 1 ? var * count / (count - 1) : var;
        D(&running_mean_)[c] = (1 - spec_.momentum) * D(&running_mean_)[c] + spec_.momentum * mean;
        D(&running_var_)[c] =
            (1 - spec_.momentum) * D(&running_var_)[c] + spec_.momentum * unbiased;
      }
      D(&mean_)[c] = mean;
      D(&inv_std_)[c] = 1.0 / std::sqrt(var + spec_.eps);
      const double scale = D(in[1])[c] * D(&inv_std_)[c];
      ForChannel(x, c, [&](int64_t i) { D(out[0])[i] = (D(in[0])[i] - mean) * scale + D(in[2])[c]; });
    }
  }

  // dx = γ/σ · (dy − mean(dy) − x̂ · mean(dy · x̂)),  dγ = Σ dy · x̂,  dβ = Σ dy.
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    const Shape& x = in[0]->shape();
    const double count = static_cast<double>(x[0] * x[2] * x[3]);
    const double* dy = D(grad_out[0]);
    for (int64_t c = 0; c < x[1]; ++c) {
      const double mean = D(&mean_)[c], inv_std = D(&inv_std_)[c];
      double sum_dy = 0, sum_dy_xhat = 0;
      ForChannel(x, c, [&](int64_t i) {
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (D(in[0])[i] - mean) * inv_std;
      });
      if (grad_in[1] != nullptr) D(grad_in[1])[c] = sum_dy_xhat;
      if (grad_in[2] != nullptr) D(grad_in[2])[c] = sum_dy;
      if (grad_in[0] == nullptr) continue;
      const double scale = D(in[1])[c] * inv_std;
      ForChannel(x, c, [&](int64_t i) {
        const double xhat = (D(in[0])[i] - mean) * inv_std;
        D(grad_in[0])[i] = scale * (dy[i] - sum_dy / count - xhat * sum_dy_xhat / count);
      });
    }
  }

 private:
  Tensor running_mean_, running_var_;
  Tensor mean_, inv_std_;  // (C) of the last Forward, for Backward
};

class AddRef final : public AddFrame {
 public:
  void Forward(Mode, Ins in, Outs out) override {
    for (int64_t i = 0; i < out[0]->numel(); ++i) D(out[0])[i] = D(in[0])[i] + D(in[1])[i];
  }
  void Backward(Ins, Ins, Ins grad_out, Outs grad_in) override {
    for (Tensor* g : grad_in)
      if (g != nullptr) g->CopyFrom(*grad_out[0]);
  }
};

class DropoutRef final : public DropoutFrame {
 public:
  explicit DropoutRef(DropoutSpec spec) : DropoutFrame(spec) {}
  void Forward(Mode mode, Ins in, Outs out) override {
    const int64_t n = in[0]->numel();
    if (mode == Mode::kEval) {
      for (int64_t i = 0; i < n; ++i) D(out[0])[i] = D(in[0])[i];
      return;
    }
    mask_.resize(n);
    DropoutMask(spec_, calls_++, absl::MakeSpan(mask_));
    for (int64_t i = 0; i < n; ++i) D(out[0])[i] = mask_[i] ? D(in[0])[i] / (1.0 - spec_.p) : 0.0;
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    for (int64_t i = 0; i < in[0]->numel(); ++i)
      D(grad_in[0])[i] = mask_[i] ? D(grad_out[0])[i] / (1.0 - spec_.p) : 0.0;
  }

 private:
  uint64_t calls_ = 0;
  std::vector<uint8_t> mask_;
};

class SubsamplePadRef final : public SubsamplePadFrame {
 public:
  explicit SubsamplePadRef(SubsamplePadSpec spec) : SubsamplePadFrame(spec) {}
  // Calls f(x index, y index) for every x element that reaches y.
  template <typename F>
  void ForEachPair(const Shape& x, const Shape& y, F f) const {
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t c = 0; c < x[1]; ++c)
        for (int64_t h = 0; h < y[2]; ++h)
          for (int64_t w = 0; w < y[3]; ++w)
            f(((n * x[1] + c) * x[2] + h * spec_.stride) * x[3] + w * spec_.stride,
              ((n * y[1] + c + spec_.pad_channels) * y[2] + h) * y[3] + w);
  }
  void Forward(Mode, Ins in, Outs out) override {
    out[0]->SetZero();
    ForEachPair(in[0]->shape(), out[0]->shape(),
                [&](int64_t xi, int64_t yi) { D(out[0])[yi] = D(in[0])[xi]; });
  }
  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    grad_in[0]->SetZero();
    ForEachPair(in[0]->shape(), out[0]->shape(),
                [&](int64_t xi, int64_t yi) { D(grad_in[0])[xi] = D(grad_out[0])[yi]; });
  }
};

class ReluRef final : public ReluFrame {
 public:
  void Forward(Mode, Ins in, Outs out) override {
    for (int64_t i = 0; i < in[0]->numel(); ++i) D(out[0])[i] = std::max(0.0, D(in[0])[i]);
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    for (int64_t i = 0; i < in[0]->numel(); ++i)
      D(grad_in[0])[i] = D(in[0])[i] > 0 ? D(grad_out[0])[i] : 0.0;
  }
};

class LinearRef final : public LinearFrame {
 public:
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

class SoftmaxCrossEntropyRef final : public SoftmaxCrossEntropyFrame {
 public:
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
std::unique_ptr<Op> ReferenceBackend::AvgPool2d(const Pool2dSpec& spec) {
  return std::make_unique<AvgPool2dRef>(spec);
}
std::unique_ptr<Op> ReferenceBackend::GlobalAvgPool() { return std::make_unique<GlobalAvgPoolRef>(); }
std::unique_ptr<Op> ReferenceBackend::BatchNorm(const BatchNormSpec& spec) {
  return std::make_unique<BatchNormRef>(spec);
}
std::unique_ptr<Op> ReferenceBackend::Add() { return std::make_unique<AddRef>(); }
std::unique_ptr<Op> ReferenceBackend::Dropout(const DropoutSpec& spec) {
  return std::make_unique<DropoutRef>(spec);
}
std::unique_ptr<Op> ReferenceBackend::SubsamplePad(const SubsamplePadSpec& spec) {
  return std::make_unique<SubsamplePadRef>(spec);
}
std::unique_ptr<Op> ReferenceBackend::Relu() { return std::make_unique<ReluRef>(); }
std::unique_ptr<Op> ReferenceBackend::Linear() { return std::make_unique<LinearRef>(); }
std::unique_ptr<Op> ReferenceBackend::SoftmaxCrossEntropy() {
  return std::make_unique<SoftmaxCrossEntropyRef>();
}

}  // namespace cohort
