#ifndef COHORT_TRAINER_OPS_CUDA_CUDA_CONTEXT_H_
#define COHORT_TRAINER_OPS_CUDA_CUDA_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>

#include "absl/status/statusor.h"
#include "trainer/ops/cuda/device_allocator.h"

namespace cohort::cuda {

// What the ops of one GPU backend share: the compute stream every op runs on in order, a
// copy stream for host-to-device input transfers (so they overlap the compute stream's work),
// cuDNN and cuBLAS handles bound to the compute stream, the caching allocator, and one
// workspace for cuDNN and cuBLAS that every op reuses (they run one at a time on the stream),
// grown only when an op needs more. Used from one thread at a time.
class CudaContext {
 public:
  // Fails (Unavailable) naming the device when there is no such GPU or driver.
  static absl::StatusOr<std::unique_ptr<CudaContext>> Create(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudaStream_t copy_stream() const { return copy_stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  CachingDeviceAllocator* allocator() const { return allocator_.get(); }

  // Makes this context's GPU the calling thread's current device.
  void MakeCurrent() const;
  // At least `bytes` of scratch, valid until the next call with a larger size (stream order
  // keeps earlier users safe).
  void* Workspace(size_t bytes);
  // Waits for everything queued on the compute stream.
  void Synchronize() const;

 private:
  explicit CudaContext(int device) : device_(device) {}

  const int device_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<CachingDeviceAllocator> allocator_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_CUDA_CONTEXT_H_
