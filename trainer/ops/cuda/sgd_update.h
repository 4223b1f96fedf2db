#ifndef COHORT_TRAINER_OPS_CUDA_SGD_UPDATE_H_
#define COHORT_TRAINER_OPS_CUDA_SGD_UPDATE_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace cohort::cuda {

// The SGD-with-momentum step of trainer/optim (same formula, PyTorch semantics) on device
// memory, in one fused kernel on `stream`:
//   v = momentum·v + g + wd·w;  w -= lr·v
// weight, velocity, grad: n device floats. Returns the launch error, if any.
cudaError_t SgdMomentumUpdate(float* weight, float* velocity, const float* grad, int64_t n,
                              float lr, float momentum, float weight_decay, cudaStream_t stream);

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_SGD_UPDATE_H_
