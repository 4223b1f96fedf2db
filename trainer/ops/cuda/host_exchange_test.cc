#include "trainer/ops/cuda/host_exchange.h"

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/ops/cuda/cuda_backend.h"

namespace cohort::cuda {
namespace {

Tensor RandomHost(int64_t n, uint64_t seed) {
  Rng rng(seed);
  Tensor t(Shape{n});
  for (float& v : t.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  return t;
}

// Gradients come down as fp32 and values go up into the parameters' dtype, for several keys in
// flight at once, over two rounds (the buffers and events are reused).
TEST(HostExchangeTest, GradientsComeDownAndValuesGoUp) {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    auto gpu = CudaBackend::Create({0, precision, true});
    if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
    const DType dtype = (*gpu)->dtype();
    struct Param {
      Tensor value, grad;
    };
    std::vector<Param> params(3);
    std::vector<ParameterTensors> ptrs;
    for (size_t k = 0; k < params.size(); ++k) {
      params[k].value = Tensor(Shape{1000 + 7 * static_cast<int64_t>(k)}, dtype, (*gpu)->allocator());
      params[k].grad = Tensor(params[k].value.shape(), dtype, (*gpu)->allocator());
      ptrs.push_back({&params[k].value, &params[k].grad});
    }
    auto exchange_ptr = (*gpu)->MakeParameterExchange(ptrs);
    ASSERT_NE(exchange_ptr, nullptr);
    ParameterExchange& exchange = *exchange_ptr;
    for (uint64_t round = 0; round < 2; ++round) {
      std::vector<Tensor> grads, values;
      for (size_t k = 0; k < params.size(); ++k) {
        grads.push_back(ConvertTo(RandomHost(params[k].grad.numel(), 10 * round + k), dtype));
        params[k].grad.CopyFrom(grads.back());
        exchange.SendGradient(static_cast<int64_t>(k));
      }
      // Every copy lands without anyone waiting for it (a copy that never did would hang here).
      for (size_t k = 0; k < params.size(); ++k) {
        while (!exchange.GradientArrived(static_cast<int64_t>(k))) {
        }
      }
      for (size_t k = 0; k < params.size(); ++k) {
        const Tensor& got = exchange.HostGradient(static_cast<int64_t>(k));
        const Tensor want = ConvertTo(grads[k], DType::kF32);
        ASSERT_EQ(got.numel(), want.numel());
        for (int64_t i = 0; i < got.numel(); ++i) {
          ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << k << " " << i;
        }
        values.push_back(RandomHost(got.numel(), 100 + 10 * round + k));
        exchange.HostValue(static_cast<int64_t>(k))->CopyFrom(values.back());
        exchange.ReceiveValue(static_cast<int64_t>(k));
      }
      for (size_t k = 0; k < params.size(); ++k) {
        Tensor back(Shape{0}, dtype);
        back.CopyFrom(params[k].value);
        const Tensor got = ConvertTo(back, DType::kF32);
        const Tensor want = ConvertTo(ConvertTo(values[k], dtype), DType::kF32);
        for (int64_t i = 0; i < got.numel(); ++i) {
          ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << k << " " << i;
        }
      }
    }
  }
}

// fp16: gradients of the scaled loss come down unscaled; a key whose gradient overflowed comes
// down as zeros, and the next step's scale is halved.
TEST(HostExchangeTest, Fp16GradientsAreUnscaledAndOverflowsZeroed) {
  auto gpu = CudaBackend::Create({0, Precision::kFp16, true});
  if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
  Tensor values[2], grads[2];
  std::vector<ParameterTensors> ptrs;
  for (int k = 0; k < 2; ++k) {
    values[k] = Tensor(Shape{500}, DType::kF16, (*gpu)->allocator());
    grads[k] = Tensor(Shape{500}, DType::kF16, (*gpu)->allocator());
    ptrs.push_back({&values[k], &grads[k]});
  }
  auto exchange = (*gpu)->MakeParameterExchange(ptrs);
  const float scale = exchange->BeginStep();
  EXPECT_EQ(scale, 65536.0f);
  Tensor g = RandomHost(500, 3);
  for (float& v : g.span<float>()) v *= 0.5f;  // the scaled values stay inside fp16's range
  const Tensor g16 = ConvertTo(g, DType::kF16);
  Tensor scaled = ConvertTo(g16, DType::kF32);
  for (float& v : scaled.span<float>()) v *= scale;
  Tensor poisoned = ConvertTo(scaled, DType::kF32);
  poisoned.data<float>()[7] = INFINITY;
  grads[0].CopyFrom(ConvertTo(scaled, DType::kF16));
  grads[1].CopyFrom(ConvertTo(poisoned, DType::kF16));
  exchange->SendGradient(0);
  exchange->SendGradient(1);
  const Tensor& clean = exchange->HostGradient(0);
  const Tensor want = ConvertTo(g16, DType::kF32);
  for (int64_t i = 0; i < 500; ++i) ASSERT_EQ(clean.data<float>()[i], want.data<float>()[i]) << i;
  const Tensor& zeroed = exchange->HostGradient(1);
  for (int64_t i = 0; i < 500; ++i) ASSERT_EQ(zeroed.data<float>()[i], 0.0f) << i;
  EXPECT_EQ(exchange->BeginStep(), scale / 2);
  EXPECT_EQ(exchange->BeginStep(), scale / 2);  // no step in between: nothing to learn from

  // The next step, at half the scale: the key that overflowed comes down clean again.
  for (float& v : scaled.span<float>()) v /= 2;
  grads[1].CopyFrom(ConvertTo(scaled, DType::kF16));
  exchange->SendGradient(1);
  const Tensor& again = exchange->HostGradient(1);
  for (int64_t i = 0; i < 500; ++i) ASSERT_EQ(again.data<float>()[i], want.data<float>()[i]) << i;
  EXPECT_EQ(exchange->BeginStep(), scale / 2);
}

}  // namespace
}  // namespace cohort::cuda
