#include "trainer/ops/op_testing.h"

#include <algorithm>
#include <cmath>

#include "trainer/base/random.h"

namespace cohort::testing {
namespace {

double Get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF64 ? t.data<double>()[i] : t.data<float>()[i];
}

void Set(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::kF64) {
    t.data<double>()[i] = v;
  } else {
    t.data<float>()[i] = static_cast<float>(v);
  }
}

bool IsLabels(const OpCase& c, size_t i) { return c.num_classes > 0 && i + 1 == c.inputs.size(); }

std::vector<const Tensor*> Ptrs(const std::vector<Tensor>& v) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : v) p.push_back(&t);
  return p;
}

}  // namespace

std::vector<OpCase> StandardOpCases() {
  auto conv = [](int stride, int pad) {
    return [=](Backend& b) { return b.Conv2d({stride, pad}); };
  };
  auto pool = [](int k, int stride, int pad, bool ceil = false) {
    return [=](Backend& b) { return b.MaxPool2d({k, stride, pad, ceil}); };
  };
  return {
      {"conv_3x3_pad1", conv(1, 1), {{2, 3, 7, 6}, {4, 3, 3, 3}, {4}}},
      {"conv_3x3_stride2", conv(2, 0), {{2, 3, 9, 8}, {5, 3, 3, 3}, {5}}},
      {"conv_lenet1_5x5_pad2", conv(1, 2), {{2, 1, 12, 12}, {6, 1, 5, 5}, {6}}},
      {"conv_lenet2_5x5", conv(1, 0), {{2, 6, 9, 9}, {16, 6, 5, 5}, {16}}},
      {"conv_1x1", conv(1, 0), {{3, 4, 5, 5}, {2, 4, 1, 1}, {2}}},
      {"maxpool_2x2", pool(2, 2, 0), {{2, 3, 8, 8}}},
      {"maxpool_3x3_stride2_pad1", pool(3, 2, 1), {{2, 2, 7, 7}}},
      // ceil_mode: last windows that reach past the image (GoogLeNet's 3/2 and 2/2 pools, and
      // with padding on a non-square input); with stride 1 it changes nothing.
      {"maxpool_3x3_stride2_ceil", pool(3, 2, 0, true), {{2, 3, 8, 8}}},
      {"maxpool_2x2_ceil", pool(2, 2, 0, true), {{2, 3, 5, 7}}},
      {"maxpool_3x3_stride2_pad1_ceil", pool(3, 2, 1, true), {{2, 2, 8, 9}}},
      {"maxpool_3x3_stride1_pad1_ceil", pool(3, 1, 1, true), {{2, 2, 5, 6}}},
      {"relu_4d", [](Backend& b) { return b.Relu(); }, {{3, 4, 5, 5}}},
      {"relu_2d", [](Backend& b) { return b.Relu(); }, {{4, 7}}},
      {"linear", [](Backend& b) { return b.Linear(); }, {{5, 7}, {3, 7}, {3}}},
      {"flatten", [](Backend& b) { return b.Flatten(); }, {{2, 3, 4, 4}}},
      {"softmax_cross_entropy", [](Backend& b) { return b.SoftmaxCrossEntropy(); },
       {{6, 10}, {6}}, 10},
      {"conv_3x3_stride2_no_bias", [](Backend& b) { return b.Conv2d({2, 1, false}); },
       {{2, 3, 8, 7}, {4, 3, 3, 3}}},
      {"avgpool_2x2", [](Backend& b) { return b.AvgPool2d({2, 2, 0}); }, {{2, 3, 8, 8}}},
      {"avgpool_3x3_stride2_pad1", [](Backend& b) { return b.AvgPool2d({3, 2, 1}); },
       {{2, 2, 7, 7}}},
      {"global_avg_pool", [](Backend& b) { return b.GlobalAvgPool(); }, {{3, 4, 5, 6}}},
      {"batch_norm", [](Backend& b) { return b.BatchNorm({3}); }, {{4, 3, 5, 5}, {3}, {3}}},
      {"add", [](Backend& b) { return b.Add(); }, {{2, 3, 4, 5}, {2, 3, 4, 5}}},
      {"concat", [](Backend& b) { return b.Concat(); },
       {{2, 3, 4, 5}, {2, 1, 4, 5}, {2, 4, 4, 5}, {2, 2, 4, 5}}},
      {"dropout", [](Backend& b) { return b.Dropout({0.3f, 7}); }, {{3, 4, 5, 5}}},
      {"subsample_pad", [](Backend& b) { return b.SubsamplePad({2, 2}); }, {{2, 4, 7, 6}}},
  };
}

std::vector<Tensor> RandomInputs(const OpCase& c, DType dtype, uint64_t seed) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Rng rng(MixKeys({seed, i}));
    if (IsLabels(c, i)) {
      Tensor t(c.inputs[i], DType::kI32);
      for (int32_t& v : t.span<int32_t>()) v = static_cast<int32_t>(rng.Below(c.num_classes));
      in.push_back(std::move(t));
      continue;
    }
    Tensor t(c.inputs[i], dtype);
    for (int64_t j = 0; j < t.numel(); ++j) Set(t, j, rng.Uniform(-1, 1));
    in.push_back(std::move(t));
  }
  return in;
}

std::vector<Tensor> ToReferenceInputs(const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) {
    out.push_back(ConvertTo(t, t.dtype() == DType::kI32 ? DType::kI32 : DType::kF64));
  }
  return out;
}

std::vector<Tensor> RunForward(Op& op, const std::vector<Tensor>& in, Mode mode, DType dtype) {
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  auto out_shapes = op.OutputShapes(shapes);
  COHORT_CHECK(out_shapes.ok(), "%s", std::string(out_shapes.status().message()).c_str());
  std::vector<Tensor> out;
  std::vector<Tensor*> out_ptrs;
  for (const Shape& s : *out_shapes) out.emplace_back(s, dtype);
  for (Tensor& t : out) out_ptrs.push_back(&t);
  op.Forward(mode, Ptrs(in), out_ptrs);
  return out;
}

std::vector<Tensor> RunBackward(Op& op, const std::vector<Tensor>& in,
                                const std::vector<Tensor>& out,
                                const std::vector<Tensor>& grad_out, DType dtype) {
  std::vector<Tensor> grads;
  std::vector<Tensor*> grad_ptrs;
  for (const Tensor& t : in) grads.emplace_back(t.dtype() == DType::kI32 ? Shape{0} : t.shape(), dtype);
  for (size_t i = 0; i < in.size(); ++i) {
    grad_ptrs.push_back(in[i].dtype() == DType::kI32 ? nullptr : &grads[i]);
  }
  op.Backward(Ptrs(in), Ptrs(out), Ptrs(grad_out), grad_ptrs);
  return grads;
}

double NormalizedMaxError(const Tensor& got, const Tensor& want) {
  COHORT_CHECK(got.shape() == want.shape(), "shapes %s vs %s", got.shape().ToString().c_str(),
               want.shape().ToString().c_str());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(Get(got, i) - Get(want, i)));
    scale = std::max(scale, std::abs(Get(want, i)));
  }
  return scale > 0 ? diff / scale : diff;
}

double FiniteDifferenceError(Backend& backend, const OpCase& c, uint64_t seed, double eps,
                             int max_coords) {
  const DType dtype = backend.dtype();
  std::unique_ptr<Op> op = c.make(backend);
  std::vector<Tensor> in = RandomInputs(c, dtype, seed);
  std::vector<Tensor> out = RunForward(*op, in, Mode::kTrain, dtype);
  std::vector<Tensor> r;  // L = sum(out · r)
  for (size_t k = 0; k < out.size(); ++k) {
    Rng rng(MixKeys({seed, 1000 + k}));
    r.emplace_back(out[k].shape(), dtype);
    for (int64_t j = 0; j < r[k].numel(); ++j) Set(r[k], j, rng.Uniform(-1, 1));
  }
  std::vector<Tensor> grads = RunBackward(*op, in, out, r, dtype);

  auto loss = [&]() {
    std::unique_ptr<Op> probe = c.make(backend);
    std::vector<Tensor> o = RunForward(*probe, in, Mode::kTrain, dtype);
    double l = 0;
    for (size_t k = 0; k < o.size(); ++k)
      for (int64_t j = 0; j < o[k].numel(); ++j) l += Get(o[k], j) * Get(r[k], j);
    return l;
  };

  double worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (IsLabels(c, i)) continue;
    Rng pick(MixKeys({seed, 2000 + i}));
    const int64_t n = in[i].numel();
    const int64_t count = max_coords <= 0 ? n : std::min<int64_t>(n, max_coords);
    double scale = 0, diff = 0;
    for (int64_t j = 0; j < n; ++j) scale = std::max(scale, std::abs(Get(grads[i], j)));
    int64_t smooth = 0;
    const double l0 = loss();
    for (int64_t s = 0; s < count; ++s) {
      const int64_t j = max_coords <= 0 ? s : static_cast<int64_t>(pick.Below(n));
      const double x0 = Get(in[i], j);
      Set(in[i], j, x0 + eps);
      const double lp = loss();
      Set(in[i], j, x0 - eps);
      const double lm = loss();
      Set(in[i], j, x0);
      // A kink inside [x-eps, x+eps] (ReLU at 0, a max-pool tie) makes the one-sided slopes
      // disagree; central differences say nothing there, so such coordinates are skipped.
      if (std::abs((lp - l0) - (l0 - lm)) / eps > 0.1 * scale) continue;
      ++smooth;
      diff = std::max(diff, std::abs((lp - lm) / (2 * eps) - Get(grads[i], j)));
    }
    COHORT_CHECK(smooth * 2 >= count, "%s: only %ld of %ld coordinates of input %zu are smooth",
                 c.label.c_str(), smooth, count, i);
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

}  // namespace cohort::testing
