#ifndef COHORT_TRAINER_OPS_CUDA_GPU_PROBE_H_
#define COHORT_TRAINER_OPS_CUDA_GPU_PROBE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::cuda {

struct GpuInfo {
  std::vector<std::string> devices;  // "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)"
  int cuda_runtime_version = 0;
  size_t cudnn_version = 0;          // what the loaded libcudnn says
  size_t cudnn_header_version = 0;   // what we compiled against
  int cublas_version = 0;
};

// The GPUs this process can use and the CUDA/cuDNN/cuBLAS versions it loaded.
// Unavailable (with the CUDA error) where there is no GPU or driver.
absl::StatusOr<GpuInfo> ProbeGpus();

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_GPU_PROBE_H_
