#include "trainer/ops/cuda/sgd_update.h"

#include <cuda_runtime.h>

#include <vector>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/ops/cuda/gpu_probe.h"
#include "trainer/optim/optimizer.h"

namespace cohort {
namespace {

// The GPU kernel against the CPU optimizer, over several steps of the same gradients.
TEST(SgdUpdateGpuTest, MatchesCpuSgd) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  const int64_t n = 1 << 20;
  Rng rng(3);
  std::vector<float> w(n), g(n);
  for (auto& x : w) x = static_cast<float>(rng.Uniform(-1, 1));
  for (auto& x : g) x = static_cast<float>(rng.Uniform(-1, 1));
  std::vector<float> w_cpu = w;
  Sgd sgd({0.9f, 1e-4f});

  float *dw, *dv, *dg;
  ASSERT_EQ(cudaMalloc(&dw, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dv, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dg, n * 4), cudaSuccess);
  cudaMemcpy(dw, w.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dg, g.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemset(dv, 0, n * 4);
  for (int step = 0; step < 3; ++step) {
    ASSERT_EQ(cuda::SgdMomentumUpdate(dw, dv, dg, n, 0.1f, 0.9f, 1e-4f, nullptr), cudaSuccess);
    sgd.Update(0, absl::MakeSpan(w_cpu), g, 0.1f);
  }
  ASSERT_EQ(cudaMemcpy(w.data(), dw, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dw);
  cudaFree(dv);
  cudaFree(dg);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(w[i], w_cpu[i], 1e-5f) << i;
}

}  // namespace
}  // namespace cohort
