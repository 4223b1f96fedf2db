#ifndef COHORT_TRAINER_OPS_CUDA_CUDA_CHECK_H_
#define COHORT_TRAINER_OPS_CUDA_CUDA_CHECK_H_

// Checks of CUDA, cuDNN and cuBLAS calls inside ops. An op cannot return an error, and its
// shapes were validated when the model was built, so a failing call is a broken device or a
// bug: it aborts with the call, the library's message and where it happened.

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "trainer/base/check.h"

#define COHORT_CUDA_CHECK(expr)                                                  \
  do {                                                                           \
    const cudaError_t cohort_err_ = (expr);                                      \
    COHORT_CHECK(cohort_err_ == cudaSuccess, "%s", cudaGetErrorString(cohort_err_)); \
  } while (0)

namespace cohort::cuda {

// Whether the work queued before `event` is done, without waiting.
inline bool EventDone(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: keep it from surfacing at the next launch check
    return false;
  }
  COHORT_CUDA_CHECK(status);
  return true;
}

}  // namespace cohort::cuda

#define COHORT_CUDNN_CHECK(expr)                                                 \
  do {                                                                           \
    const cudnnStatus_t cohort_st_ = (expr);                                     \
    COHORT_CHECK(cohort_st_ == CUDNN_STATUS_SUCCESS, "%s", cudnnGetErrorString(cohort_st_)); \
  } while (0)

#define COHORT_CUBLAS_CHECK(expr)                                                \
  do {                                                                           \
    const cublasStatus_t cohort_st_ = (expr);                                    \
    COHORT_CHECK(cohort_st_ == CUBLAS_STATUS_SUCCESS, "%s", cublasGetStatusString(cohort_st_)); \
  } while (0)

#endif  // COHORT_TRAINER_OPS_CUDA_CUDA_CHECK_H_
