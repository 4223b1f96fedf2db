#include "trainer/ops/cuda/host_exchange.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/ops/cuda/cuda_backend.h"
#include "trainer/ops/cuda/replica_exchange.h"

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

std::vector<float> HostFloats(const Tensor& t) {
  const Tensor f32 = ToHost(t, DType::kF32);
  return std::vector<float>(f32.data<float>(), f32.data<float>() + f32.numel());
}

// One replica's parameters on one backend.
struct Replica {
  std::vector<Tensor> values, grads;
  std::vector<ParameterTensors> ptrs;
};

Replica MakeReplica(Backend* gpu, const std::vector<int64_t>& sizes) {
  Replica r;
  for (int64_t n : sizes) {
    r.values.emplace_back(Shape{n}, gpu->dtype(), gpu->allocator());
    r.grads.emplace_back(Shape{n}, gpu->dtype(), gpu->allocator());
  }
  for (size_t k = 0; k < sizes.size(); ++k) r.ptrs.push_back({&r.values[k], &r.grads[k]});
  return r;
}

// Three replicas (on GPU 0, or on GPUs 0, 1, 2 where there are three), weights 17/33, 10/33,
// 6/33: the GPUs' own reduction gives the host's sum bit for bit, and every replica takes every
// pulled value; over two rounds (buffers and events reused), several keys in flight.
TEST(DeviceReplicaExchangeTest, SumsAsTheHostDoes) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "needs a GPU";
  }
  const std::vector<int64_t> sizes = {1000, 1007, 3};
  const std::vector<float> weights = {17.0f / 33, 10.0f / 33, 6.0f / 33};
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(PrecisionName(precision));
    std::vector<std::unique_ptr<CudaBackend>> device_gpus, host_gpus;
    for (int r = 0; r < 3; ++r) {
      auto a = CudaBackend::Create({gpus >= 3 ? r : 0, precision, true});
      auto b = CudaBackend::Create({gpus >= 3 ? r : 0, precision, true});
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      device_gpus.push_back(std::move(*a));
      host_gpus.push_back(std::move(*b));
    }
    std::vector<Replica> on_device, on_host;
    std::vector<Backend*> device_backends;
    std::vector<std::vector<ParameterTensors>> device_ptrs;
    std::vector<std::unique_ptr<ParameterExchange>> host_each;
    for (int r = 0; r < 3; ++r) {
      on_device.push_back(MakeReplica(device_gpus[r].get(), sizes));
      on_host.push_back(MakeReplica(host_gpus[r].get(), sizes));
    }
    for (int r = 0; r < 3; ++r) {
      device_backends.push_back(device_gpus[r].get());
      device_ptrs.push_back(on_device[r].ptrs);
      host_gpus[r]->BindCallingThread();
      host_each.push_back(host_gpus[r]->MakeParameterExchange(on_host[r].ptrs));
    }
    auto device = device_gpus[0]->MakeReplicaExchange(device_backends, device_ptrs);
    ASSERT_NE(device, nullptr);
    auto host = MakeHostReplicaExchange(std::move(host_each));
    for (uint64_t round = 0; round < 2; ++round) {
      for (int r = 0; r < 3; ++r) {
        for (size_t k = 0; k < sizes.size(); ++k) {
          const Tensor g = ConvertTo(RandomHost(sizes[k], 100 * round + 10 * r + k),
                                     device_gpus[r]->dtype());
          on_device[r].grads[k].CopyFrom(g);
          on_host[r].grads[k].CopyFrom(g);
          device_gpus[r]->BindCallingThread();
          device->GradientDone(r, static_cast<int64_t>(k));
          host_gpus[r]->BindCallingThread();
          host->GradientDone(r, static_cast<int64_t>(k));
        }
      }
      for (size_t k = 0; k < sizes.size(); ++k) {
        device->Reduce(static_cast<int64_t>(k), weights);
        host->Reduce(static_cast<int64_t>(k), weights);
      }
      for (size_t k = 0; k < sizes.size(); ++k) {
        const auto key = static_cast<int64_t>(k);
        while (!device->GradientArrived(key)) {
        }
        EXPECT_EQ(HostFloats(device->HostGradient(key)), HostFloats(host->HostGradient(key)))
            << "round " << round << " key " << k;
        const Tensor value = RandomHost(sizes[k], 1000 + 10 * round + k);
        device->HostValue(key)->CopyFrom(value);
        for (int r = 0; r < 3; ++r) {
          device_gpus[r]->BindCallingThread();
          device->ReceiveValue(r, key);
        }
        const std::vector<float> want = HostFloats(ConvertTo(value, device_gpus[0]->dtype()));
        for (int r = 0; r < 3; ++r) {
          EXPECT_EQ(HostFloats(on_device[r].values[k]), want) << "replica " << r << " key " << k;
        }
      }
    }
  }
}

// fp16 scales each replica's loss: its replicas go through the host.
TEST(DeviceReplicaExchangeTest, Fp16ReplicasGoThroughTheHost) {
  auto a = CudaBackend::Create({0, Precision::kFp16, true});
  if (!a.ok()) GTEST_SKIP() << "needs a GPU: " << a.status();
  auto b = CudaBackend::Create({0, Precision::kFp16, true});
  ASSERT_TRUE(b.ok()) << b.status();
  Replica ra = MakeReplica(a->get(), {8}), rb = MakeReplica(b->get(), {8});
  EXPECT_EQ((*a)->MakeReplicaExchange({a->get(), b->get()}, {ra.ptrs, rb.ptrs}), nullptr);
}

}  // namespace
}  // namespace cohort::cuda
