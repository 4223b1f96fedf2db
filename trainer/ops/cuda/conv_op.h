#ifndef COHORT_TRAINER_OPS_CUDA_CONV_OP_H_
#define COHORT_TRAINER_OPS_CUDA_CONV_OP_H_

#include <memory>

#include "trainer/ops/cuda/cuda_backend.h"
#include "trainer/ops/op.h"

namespace cohort::cuda {

// The CUDA backend's Conv2d (CudaBackend::Conv2d): cuDNN's legacy convolution API, its
// algorithms chosen by cudnnFind per input shape within the backend's precision (and, with
// deterministic, among the deterministic ones). Runs on the backend's stream.
std::unique_ptr<Op> MakeConvOp(std::shared_ptr<CudaBackend::Shared> s, const Conv2dSpec& spec);

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_CONV_OP_H_
