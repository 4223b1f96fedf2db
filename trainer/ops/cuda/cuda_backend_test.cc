#include "trainer/ops/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/models/models.h"
#include "trainer/nn/loss.h"
#include "trainer/ops/op_testing.h"
#include "trainer/ops/reference/reference_backend.h"

namespace cohort::cuda {
namespace {

using cohort::testing::OpCase;

// One GPU configuration: what it stores in, its layout, and how close to the double-precision
// reference it must come (relative to the largest reference value).
struct Config {
  Precision precision;
  bool channels_last;
  double tolerance;
  bool deterministic = false;
  bool fuse_batch_norm_relu = false;
};

std::string ConfigName(const Config& c) {
  return PrecisionName(c.precision) + (c.channels_last ? "_nhwc" : "_nchw") +
         (c.deterministic ? "_deterministic" : "") + (c.fuse_batch_norm_relu ? "_fused" : "");
}

absl::StatusOr<std::unique_ptr<CudaBackend>> MakeBackend(const Config& c) {
  CudaBackendOptions options{0, c.precision, c.channels_last, c.deterministic};
  options.fuse_batch_norm_relu = c.fuse_batch_norm_relu;
  return CudaBackend::Create(options);
}

// (N, C, H, W) host data ↔ channels-last memory, for activations of a channels-last backend.
Tensor Permute(const Tensor& t, bool to_nhwc) {
  const Shape& s = t.shape();
  const int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  Tensor out(s, t.dtype());
  const double* src = t.data<double>();
  double* dst = out.data<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t nchw = (i * c + k) * hw + p, nhwc = (i * hw + p) * c + k;
        if (to_nhwc) {
          dst[nhwc] = src[nchw];
        } else {
          dst[nchw] = src[nhwc];
        }
      }
  return out;
}

// Moves tensors between the reference's F64 NCHW host form and the GPU backend's form.
class Transfer {
 public:
  Transfer(CudaBackend& gpu, const Config& config) : gpu_(gpu), config_(config) {}

  // values: F64 on the host (I32 labels pass as they are). activation: a rank-4 activation,
  // which a channels-last backend holds permuted.
  Tensor Up(const Tensor& values, bool activation, DType dtype) const {
    Tensor host = values.dtype() == DType::kI32 ? ConvertTo(values, DType::kI32)
                                                : ConvertTo(Arrange(values, activation, true), dtype);
    Tensor device(Shape{0}, host.dtype(), gpu_.allocator());
    device.CopyFrom(host);
    return device;
  }
  Tensor Down(const Tensor& device, bool activation) const {
    Tensor host(Shape{0}, device.dtype());
    host.CopyFrom(device);
    return Arrange(ConvertTo(host, DType::kF64), activation, false);
  }
  // The values the GPU will see, in F64: rounded to its storage dtype.
  Tensor Rounded(const Tensor& values, DType dtype) const {
    return ConvertTo(ConvertTo(values, dtype), DType::kF64);
  }

 private:
  Tensor Arrange(const Tensor& t, bool activation, bool to_nhwc) const {
    if (!activation || !config_.channels_last || t.shape().rank() != 4) {
      return ConvertTo(t, DType::kF64);
    }
    return Permute(t, to_nhwc);
  }
  CudaBackend& gpu_;
  Config config_;
};

// Max pooling routes each gradient to its window's maximum; ties (likely once uniform values
// are rounded to 16 bits) may go to either element. Distinct multiples of 1/256, exact in
// bf16 and fp16, leave no ties.
Tensor DistinctValues(const Shape& shape, uint64_t seed) {
  Tensor t(shape);
  const int64_t n = t.numel();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i - n / 2;
  Rng rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i) + 1))]);
  }
  COHORT_CHECK(n <= 512, "distinct values for %ld elements would need more than 8 bits", n);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(order[i]) / 256.0f;
  return t;
}

// Rank-4 inputs are activations, except a convolution's weights.
bool IsActivation(const Op& op, size_t input, const Shape& shape) {
  return shape.rank() == 4 && !(op.name() == "conv2d" && input == 1);
}

class CudaOpTest : public ::testing::TestWithParam<std::tuple<OpCase, Config>> {};

// Forward, backward and op state on fresh random inputs, against the double-precision
// reference fed the same (storage-rounded) values.
TEST_P(CudaOpTest, MatchesReference) {
  const auto& [c, config] = GetParam();
  auto gpu = MakeBackend(config);
  if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
  const DType dtype = (*gpu)->dtype();
  Transfer move(**gpu, config);
  ReferenceBackend ref;
  for (uint64_t seed : {31, 32}) {
    for (Mode mode : {Mode::kEval, Mode::kTrain}) {
      auto op = c.make(**gpu);
      auto op_ref = c.make(ref);
      const bool is_loss = op->name() == "softmax_cross_entropy";
      std::vector<Tensor> in_ref, in;
      std::vector<Tensor> random = testing::RandomInputs(c, DType::kF32, seed);
      if (op->name() == "max_pool2d") random[0] = DistinctValues(random[0].shape(), seed);
      for (Tensor& t : random) {
        const bool labels = t.dtype() == DType::kI32;
        in_ref.push_back(labels ? std::move(t) : move.Rounded(ConvertTo(t, DType::kF64), dtype));
        in.push_back(move.Up(in_ref.back(), IsActivation(*op, in.size(), t.shape()), dtype));
      }
      auto out_ref = testing::RunForward(*op_ref, in_ref, mode, DType::kF64);
      std::vector<Tensor> out;
      std::vector<Tensor*> out_ptrs;
      for (const Tensor& r : out_ref) {
        out.emplace_back(r.shape(), is_loss ? DType::kF32 : dtype, (*gpu)->allocator());
      }
      for (Tensor& t : out) out_ptrs.push_back(&t);
      std::vector<const Tensor*> in_ptrs;
      for (const Tensor& t : in) in_ptrs.push_back(&t);
      op->Forward(mode, in_ptrs, out_ptrs);
      for (size_t k = 0; k < out.size(); ++k) {
        EXPECT_LT(testing::NormalizedMaxError(move.Down(out[k], out[k].shape().rank() == 4),
                                              out_ref[k]),
                  config.tolerance)
            << c.label << " forward output " << k << " seed " << seed;
      }
      auto state = op->State();
      auto state_ref = op_ref->State();
      ASSERT_EQ(state.size(), state_ref.size());
      for (size_t k = 0; k < state.size(); ++k) {
        EXPECT_LT(testing::NormalizedMaxError(move.Down(*state[k].value, false),
                                              *state_ref[k].value),
                  config.tolerance)
            << c.label << " " << state[k].name;
      }
      if (mode == Mode::kEval) continue;

      std::vector<Tensor> dy_ref, dy;
      for (size_t k = 0; k < out_ref.size(); ++k) {
        OpCase up{"", nullptr, {out_ref[k].shape()}};
        Tensor r = ConvertTo(testing::RandomInputs(up, DType::kF32, seed + 100)[0], DType::kF64);
        dy_ref.push_back(move.Rounded(r, is_loss ? DType::kF32 : dtype));
        dy.push_back(move.Up(dy_ref.back(), r.shape().rank() == 4, is_loss ? DType::kF32 : dtype));
      }
      auto grads_ref = testing::RunBackward(*op_ref, in_ref, out_ref, dy_ref, DType::kF64);
      std::vector<Tensor> grads;
      std::vector<Tensor*> grad_ptrs;
      for (const Tensor& t : in) {
        grads.emplace_back(t.dtype() == DType::kI32 ? Shape{0} : t.shape(), dtype,
                           (*gpu)->allocator());
      }
      for (size_t i = 0; i < in.size(); ++i) {
        grad_ptrs.push_back(in[i].dtype() == DType::kI32 ? nullptr : &grads[i]);
      }
      std::vector<const Tensor*> out_cptrs, dy_ptrs;
      for (const Tensor& t : out) out_cptrs.push_back(&t);
      for (const Tensor& t : dy) dy_ptrs.push_back(&t);
      // Once with every gradient asked for; once without the first input's, as a model's first
      // layer asks (its input is the images).
      for (bool first_too : {true, false}) {
        if (!first_too) {
          if (grad_ptrs.size() < 2) break;
          grad_ptrs[0] = nullptr;
          for (size_t i = 1; i < grads.size(); ++i) grads[i].SetZero();
        }
        op->Backward(in_ptrs, out_cptrs, dy_ptrs, grad_ptrs);
        for (size_t i = 0; i < in.size(); ++i) {
          if (grad_ptrs[i] == nullptr) continue;
          EXPECT_LT(testing::NormalizedMaxError(
                        move.Down(grads[i], IsActivation(*op, i, in[i].shape())), grads_ref[i]),
                    config.tolerance)
              << c.label << " gradient of input " << i << " seed " << seed
              << (first_too ? "" : " without the first input's");
        }
      }
    }
  }
}

// fp32 within 1e-4 of the reference (TF32 within 1e-2), the 16-bit formats within 1e-2.
const Config kConfigs[] = {
    {Precision::kFp32, false, 1e-4}, {Precision::kFp32, true, 1e-4},
    {Precision::kTf32, true, 1e-2},  {Precision::kBf16, true, 1e-2},
    {Precision::kBf16, false, 1e-2}, {Precision::kFp16, true, 1e-2},
};

// Every backend's cases, and cases at the sizes of a CIFAR ResNet's first layers (where cuDNN
// picks other algorithms than for small inputs), with element counts that are not a whole
// number of 16-byte vectors, and a concatenation of more inputs than one launch copies.
std::vector<OpCase> GpuOpCases() {
  std::vector<OpCase> cases = testing::StandardOpCases();
  cases.push_back({"conv_resnet_stem", [](Backend& b) { return b.Conv2d({1, 1, false}); },
                   {{8, 3, 32, 32}, {16, 3, 3, 3}}});
  cases.push_back({"conv_1x1_no_bias", [](Backend& b) { return b.Conv2d({1, 0, false}); },
                   {{4, 24, 6, 6}, {16, 24, 1, 1}}});
  cases.push_back({"batch_norm_resnet", [](Backend& b) { return b.BatchNorm({16}); },
                   {{8, 16, 32, 32}, {16}, {16}}});
  cases.push_back({"relu_odd", [](Backend& b) { return b.Relu(); }, {{3, 5, 7, 9}}});
  cases.push_back({"add_odd", [](Backend& b) { return b.Add(); }, {{3, 5, 7, 9}, {3, 5, 7, 9}}});
  // More inputs than one launch takes (kMaxChannelParts), with odd channel counts.
  std::vector<Shape> nine;
  for (int64_t c : {1, 3, 2, 5, 1, 4, 7, 2, 3}) nine.push_back({2, c, 3, 5});
  cases.push_back({"concat_nine", [](Backend& b) { return b.Concat(); }, nine});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, CudaOpTest,
    ::testing::Combine(::testing::ValuesIn(GpuOpCases()),
                       ::testing::ValuesIn(kConfigs)),
    [](const auto& info) {
      return std::get<0>(info.param).label + "_" + ConfigName(std::get<1>(info.param));
    });

// After the first steps have sized every buffer and picked every algorithm, training steps
// allocate nothing from the driver.
TEST(CudaBackendTest, SteadyStateStepAllocatesNothing) {
  auto gpu = CudaBackend::Create({0, Precision::kBf16, true});
  if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
  auto model = BuildModel("resnet20", gpu->get(), Shape{3, 32, 32}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->InitParameters(5);
  SoftmaxCrossEntropyLoss loss(gpu->get());
  Tensor images(Shape{64, 3, 32, 32});
  Tensor labels(Shape{64}, DType::kI32);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = (i % 17) / 17.0f - 0.5f;
  for (int64_t i = 0; i < labels.numel(); ++i) labels.data<int32_t>()[i] = i % 10;
  auto step = [&] {
    const double l = loss.Forward((*model)->Forward(Mode::kTrain, images), labels);
    (*model)->Backward(loss.Backward());
    return l;
  };
  step();
  step();
  const auto before = (*gpu)->context()->allocator()->stats();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(step()));
  (*gpu)->context()->Synchronize();
  const auto after = (*gpu)->context()->allocator()->stats();
  EXPECT_EQ(after.driver_allocations, before.driver_allocations);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

// A whole ResNet-20 training step (batch norm in training mode, residual sums, the loss) on the
// GPU against the reference backend on the same weights and batch: the loss, every parameter's
// gradient and the running statistics after it, at the size the CPU backend's own test uses
// (trainer/models:models_test, within 1e-4 there). Through twenty layers of batch norm on four
// images the gradients of the first layers shrink while rounding errors do not: at 32×32 with 8
// images even oneDNN's fp32 gradients differ from the reference by up to 2e-2. A 16-bit GPU
// rounds every activation, so no fixed bound fits it: its bound is what the same rounding does
// to the reference itself. The reference runs the step again from its weights and images each
// moved by up to a 16-bit rounding (a relative 2^-8), and the GPU may differ from the reference
// by at most 4× that (a rounding at every layer's output against one at every layer's weights
// and the input), and never by less than the fixed tolerance.
class Resnet20StepTest : public ::testing::TestWithParam<Config> {};

// A reference step's results: the loss, then every parameter's gradient and every state tensor.
struct StepResult {
  double loss = 0;
  std::vector<Tensor> grads, state;
};

StepResult ReferenceStep(const std::vector<Tensor>& weights, const Tensor& images,
                         const Tensor& labels, double perturbation, uint64_t seed) {
  ReferenceBackend ref;
  auto r = BuildModel("resnet20", &ref, Shape{3, 16, 16}, 10);
  COHORT_CHECK(r.ok(), "%s", std::string(r.status().message()).c_str());
  Rng rng(seed);
  auto moved = [&](const Tensor& t) {
    Tensor out(t.shape(), DType::kF64);
    out.CopyFrom(t);
    for (double& v : out.span<double>()) v *= 1 + perturbation * rng.Uniform(-1, 1);
    return out;
  };
  for (size_t i = 0; i < weights.size(); ++i) {
    (*r)->parameters()[i]->value.CopyFrom(moved(weights[i]));
  }
  // The reference takes these as its input form as they are, and its first layer reads them
  // again in Backward.
  const Tensor x = moved(images);
  SoftmaxCrossEntropyLoss loss(&ref);
  StepResult out;
  out.loss = loss.Forward((*r)->Forward(Mode::kTrain, x), labels);
  (*r)->Backward(loss.Backward());
  for (const auto* p : (*r)->parameters()) {
    out.grads.emplace_back(p->grad.shape(), DType::kF64);
    out.grads.back().CopyFrom(p->grad);
  }
  for (const auto& s : (*r)->state()) {
    out.state.emplace_back(s.value->shape(), DType::kF64);
    out.state.back().CopyFrom(*s.value);
  }
  return out;
}

TEST_P(Resnet20StepTest, MatchesTheReference) {
  const Config& c = GetParam();
  auto gpu = MakeBackend(c);
  if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
  auto m = BuildModel("resnet20", gpu->get(), Shape{3, 16, 16}, 10);
  ASSERT_TRUE(m.ok()) << m.status();
  (*m)->InitParameters(3);
  // The reference starts from the weights and images as the GPU stores them.
  const Transfer move(**gpu, c);
  std::vector<Tensor> weights;
  for (const auto* p : (*m)->parameters()) weights.push_back(move.Down(p->value, false));
  Tensor x(Shape{4, 3, 16, 16});
  Tensor labels(Shape{4}, DType::kI32);
  Rng rng(9);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(10));
  const Tensor x_ref = move.Rounded(x, (*gpu)->dtype());
  const StepResult want = ReferenceStep(weights, x_ref, labels, 0, 0);
  const bool rounds = (*gpu)->dtype() != DType::kF32;
  const StepResult moved =
      rounds ? ReferenceStep(weights, x_ref, labels, std::ldexp(1.0, -8), 17) : StepResult{};

  SoftmaxCrossEntropyLoss loss(gpu->get());
  const double l = loss.Forward((*m)->Forward(Mode::kTrain, x), labels);
  EXPECT_NEAR(l, want.loss, std::max(c.tolerance * std::abs(want.loss),
                                     rounds ? 4 * std::abs(moved.loss - want.loss) : 0.0));
  (*m)->Backward(loss.Backward());
  // Every error is compared, and the worst of each kind, against its bound, printed for the
  // record.
  auto check = [&](const char* kind, const std::string& name, const Tensor& got, const Tensor& w,
                   const Tensor* shifted, std::pair<double, std::string>* worst) {
    const double e = testing::NormalizedMaxError(got, w);
    const double bound =
        std::max(c.tolerance, shifted ? 4 * testing::NormalizedMaxError(*shifted, w) : 0.0);
    EXPECT_LT(e, bound) << kind << " " << name;
    *worst = std::max(*worst, {e / bound, name});
  };
  std::pair<double, std::string> worst_grad{0, ""}, worst_state{0, ""};
  for (size_t i = 0; i < (*m)->parameters().size(); ++i) {
    const auto& p = *(*m)->parameters()[i];
    check("gradient", p.name, move.Down(p.grad, false), want.grads[i],
          rounds ? &moved.grads[i] : nullptr, &worst_grad);
  }
  ASSERT_EQ((*m)->state().size(), want.state.size());
  for (size_t i = 0; i < (*m)->state().size(); ++i) {
    const auto& s = (*m)->state()[i];
    check("state", s.name, move.Down(*s.value, false), want.state[i],
          rounds ? &moved.state[i] : nullptr, &worst_state);
  }
  std::printf("resnet20 step %s: loss %.6f vs %.6f%s; worst gradient %.2f of its bound (%s), "
              "worst state %.2f of its bound (%s)\n",
              ConfigName(c).c_str(), l, want.loss,
              rounds ? absl::StrFormat(" (%.6f from moved weights)", moved.loss).c_str() : "",
              worst_grad.first, worst_grad.second.c_str(), worst_state.first,
              worst_state.second.c_str());
}

INSTANTIATE_TEST_SUITE_P(Configs, Resnet20StepTest,
                         ::testing::Values(Config{Precision::kFp32, true, 1e-3},
                                           Config{Precision::kFp32, true, 1e-3, true},
                                           Config{Precision::kFp32, false, 1e-3},
                                           Config{Precision::kBf16, true, 5e-2},
                                           Config{Precision::kBf16, true, 5e-2, false, true},
                                           Config{Precision::kBf16, false, 5e-2}),
                         [](const auto& info) { return ConfigName(info.param); });

// With deterministic algorithms, the same step on a fresh model gives the same bits.
TEST(CudaBackendTest, DeterministicStepsRepeatBitForBit) {
  std::vector<std::vector<uint8_t>> runs;
  for (int run = 0; run < 2; ++run) {
    auto gpu = CudaBackend::Create({0, Precision::kFp32, true, /*deterministic=*/true});
    if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
    auto m = BuildModel("resnet20", gpu->get(), Shape{3, 16, 16}, 10);
    ASSERT_TRUE(m.ok()) << m.status();
    (*m)->InitParameters(3);
    Tensor x(Shape{4, 3, 16, 16});
    Tensor labels(Shape{4}, DType::kI32);
    Rng rng(9);
    for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
    for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(10));
    SoftmaxCrossEntropyLoss loss(gpu->get());
    loss.Forward((*m)->Forward(Mode::kTrain, x), labels);
    (*m)->Backward(loss.Backward());
    std::vector<uint8_t> bytes;
    for (const Parameter* p : (*m)->parameters()) {
      Tensor host(Shape{0}, p->grad.dtype());
      host.CopyFrom(p->grad);
      const auto* b = static_cast<const uint8_t*>(host.raw());
      bytes.insert(bytes.end(), b, b + host.nbytes());
    }
    runs.push_back(std::move(bytes));
  }
  EXPECT_TRUE(runs[0] == runs[1]);
}

// Images from pageable and from pinned host memory arrive the same, converted to the backend's
// layout and dtype.
TEST(CudaBackendTest, ImportsImagesIntoTheBackendsLayout) {
  auto gpu = CudaBackend::Create({0, Precision::kFp32, true});
  if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
  Tensor pageable(Shape{2, 3, 4, 5});
  Tensor pinned(Shape{2, 3, 4, 5}, DType::kF32, PinnedAllocator());
  for (int64_t i = 0; i < pageable.numel(); ++i) {
    pageable.data<float>()[i] = static_cast<float>(i);
    pinned.data<float>()[i] = static_cast<float>(i);
  }
  const Tensor nhwc = Permute(ConvertTo(pageable, DType::kF64), true);
  for (const Tensor* images : {&pageable, &pinned}) {
    Tensor scratch(Shape{0}, DType::kF32, (*gpu)->allocator());
    const Tensor& x = (*gpu)->ImportImages(*images, &scratch);
    EXPECT_EQ(&x, &scratch);
    Tensor back;
    back.CopyFrom(x);
    EXPECT_EQ(testing::NormalizedMaxError(ConvertTo(back, DType::kF64), nhwc), 0.0);
  }
}

TEST(CudaBackendTest, AllocatorReusesFreedBlocks) {
  auto gpu = CudaBackend::Create({0, Precision::kFp32, false});
  if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
  CachingDeviceAllocator& a = *(*gpu)->context()->allocator();
  void* p = a.Allocate(3 << 20);
  a.Free(p);
  const auto before = a.stats();
  void* q = a.Allocate((3 << 20) - 100);  // rounds to the same block
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().driver_allocations, before.driver_allocations);
  EXPECT_EQ(a.stats().cache_hits, before.cache_hits + 1);
  void* tiny = a.Allocate(256);  // far smaller: not served by the big block
  EXPECT_NE(tiny, p);
  a.Free(q);
  a.Free(tiny);
  EXPECT_EQ(a.stats().bytes_in_use, before.bytes_in_use);
}

}  // namespace
}  // namespace cohort::cuda
