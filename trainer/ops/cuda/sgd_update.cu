#include "trainer/ops/cuda/sgd_update.h"

namespace cohort::cuda {
namespace {

__global__ void SgdMomentumKernel(float* __restrict__ w, float* __restrict__ v,
                                  const float* __restrict__ g, int64_t n, float lr, float mu,
                                  float wd) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float vi = mu * v[i] + g[i] + wd * w[i];
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

}  // namespace

cudaError_t SgdMomentumUpdate(float* weight, float* velocity, const float* grad, int64_t n,
                              float lr, float momentum, float weight_decay, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  // A grid-stride loop covers the rest when n is huge.
  SgdMomentumKernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0,
                      stream>>>(weight, velocity, grad, n, lr, momentum, weight_decay);
  return cudaGetLastError();
}

}  // namespace cohort::cuda
