// Linked into the binaries that train on GPUs (//trainer:train_gpu): registers the cuDNN/cuBLAS
// backend for --devices=gpu:I, channels-last.

#include "trainer/loop/devices.h"
#include "trainer/ops/cuda/cuda_backend.h"

namespace cohort {
namespace {

const bool kRegistered = RegisterGpuBackendFactory(
    [](int index, const DeviceOptions& options) -> absl::StatusOr<std::unique_ptr<Backend>> {
      auto gpu = cuda::CudaBackend::Create(
          {index, options.precision, /*channels_last=*/true, options.deterministic});
      if (!gpu.ok()) return gpu.status();
      return std::unique_ptr<Backend>(std::move(*gpu));
    });

}  // namespace
}  // namespace cohort
