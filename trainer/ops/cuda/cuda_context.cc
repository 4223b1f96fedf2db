#include "trainer/ops/cuda/cuda_context.h"

#include "absl/strings/str_cat.h"
#include "trainer/ops/cuda/cuda_check.h"

namespace cohort::cuda {
namespace {

// Enough for cuBLAS's kernels and most convolution algorithms; convolutions that measure
// faster with more grow it.
constexpr size_t kInitialWorkspace = size_t{32} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<CudaContext>> CudaContext::Create(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat(
        "GPU ", device, " is not available (", count, " visible",
        err != cudaSuccess ? absl::StrCat(": ", cudaGetErrorString(err)) : std::string(),
        "); check the driver and CUDA_VISIBLE_DEVICES, or train with --devices=cpu"));
  }
  std::unique_ptr<CudaContext> ctx(new CudaContext(device));
  ctx->MakeCurrent();
  COHORT_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
  COHORT_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->copy_stream_, cudaStreamNonBlocking));
  COHORT_CUDNN_CHECK(cudnnCreate(&ctx->cudnn_));
  COHORT_CUDNN_CHECK(cudnnSetStream(ctx->cudnn_, ctx->stream_));
  COHORT_CUBLAS_CHECK(cublasCreate(&ctx->cublas_));
  COHORT_CUBLAS_CHECK(cublasSetStream(ctx->cublas_, ctx->stream_));
  ctx->allocator_ = std::make_unique<CachingDeviceAllocator>(device, ctx->stream_);
  ctx->Workspace(kInitialWorkspace);
  return ctx;
}

CudaContext::~CudaContext() {
  MakeCurrent();
  Synchronize();
  if (workspace_ != nullptr) allocator_->Free(workspace_);
  allocator_.reset();
  cublasDestroy(cublas_);
  cudnnDestroy(cudnn_);
  cudaStreamDestroy(copy_stream_);
  cudaStreamDestroy(stream_);
}

void CudaContext::MakeCurrent() const { COHORT_CUDA_CHECK(cudaSetDevice(device_)); }

void* CudaContext::Workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    if (workspace_ != nullptr) allocator_->Free(workspace_);
    workspace_ = allocator_->Allocate(bytes);
    workspace_bytes_ = bytes;
    // cuBLAS takes the same scratch, so its kernels never allocate on their own.
    COHORT_CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_, workspace_bytes_));
  }
  return workspace_;
}

void CudaContext::Synchronize() const { COHORT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

}  // namespace cohort::cuda
