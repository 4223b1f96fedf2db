// gpu_info: prints the GPUs and the CUDA, cuDNN and cuBLAS versions this process loads.

#include <cstdio>

#include "trainer/ops/cuda/gpu_probe.h"

int main() {
  auto info = cohort::cuda::ProbeGpus();
  if (!info.ok()) {
    std::fprintf(stderr, "gpu_info: %s\n", std::string(info.status().message()).c_str());
    return 1;
  }
  for (size_t i = 0; i < info->devices.size(); ++i) std::printf("gpu %zu: %s\n", i, info->devices[i].c_str());
  std::printf("cuda runtime %d, cudnn %zu (headers %zu), cublas %d\n", info->cuda_runtime_version,
              info->cudnn_version, info->cudnn_header_version, info->cublas_version);
  return 0;
}
