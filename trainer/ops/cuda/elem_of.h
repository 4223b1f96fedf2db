#ifndef COHORT_TRAINER_OPS_CUDA_ELEM_OF_H_
#define COHORT_TRAINER_OPS_CUDA_ELEM_OF_H_

#include "trainer/ops/cuda/kernels.h"
#include "trainer/tensor/tensor.h"

namespace cohort::cuda {

// The kernels' name for a floating-point storage dtype (F32, BF16, F16).
inline Elem ElemOf(DType dtype) {
  return dtype == DType::kBF16 ? Elem::kBF16 : dtype == DType::kF16 ? Elem::kF16 : Elem::kF32;
}

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_ELEM_OF_H_
