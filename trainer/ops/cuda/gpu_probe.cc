#include "trainer/ops/cuda/gpu_probe.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "absl/strings/str_cat.h"

namespace cohort::cuda {

absl::StatusOr<GpuInfo> ProbeGpus() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return absl::UnavailableError(absl::StrCat("no usable GPU: ", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices"));
  }
  GpuInfo info;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    info.devices.push_back(absl::StrCat(p.name, " (sm_", p.major, p.minor, ", ",
                                        p.totalGlobalMem >> 30, " GiB)"));
  }
  cudaRuntimeGetVersion(&info.cuda_runtime_version);
  info.cudnn_version = cudnnGetVersion();
  info.cudnn_header_version = CUDNN_VERSION;
  cublasHandle_t handle;
  if (cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS) {
    cublasGetVersion(handle, &info.cublas_version);
    cublasDestroy(handle);
  }
  return info;
}

}  // namespace cohort::cuda
