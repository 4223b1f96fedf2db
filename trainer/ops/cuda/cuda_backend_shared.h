#ifndef COHORT_TRAINER_OPS_CUDA_CUDA_BACKEND_SHARED_H_
#define COHORT_TRAINER_OPS_CUDA_CUDA_BACKEND_SHARED_H_

// Inside the CUDA backend: what its ops share (cuda_backend.cc and the ops' files), not for its
// users.

#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "trainer/ops/cuda/cuda_backend.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/cuda_context.h"
#include "trainer/ops/cuda/elem_of.h"
#include "trainer/ops/op.h"
#include "trainer/ops/precision.h"

namespace cohort::cuda {

struct CudaBackend::Shared {
  std::unique_ptr<CudaContext> ctx;
  CudaBackendOptions options;
  DType dtype = DType::kF32;
  // A convolution's weight gradient in channels-last order, before its transpose into the
  // parameter's: every convolution shares it (they run one at a time on the stream).
  Tensor conv_dw_staging;

  bool nhwc() const { return options.channels_last; }
  Elem elem() const { return ElemOf(dtype); }
  cudnnDataType_t cudnn_type() const {
    return dtype == DType::kBF16  ? CUDNN_DATA_BFLOAT16
           : dtype == DType::kF16 ? CUDNN_DATA_HALF
                                  : CUDNN_DATA_FLOAT;
  }
  cudaDataType_t blas_type() const {
    return dtype == DType::kBF16 ? CUDA_R_16BF : dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
  }
  // fp32 keeps cuDNN off the tensor cores' TF32 mode; every other precision lets it on.
  cudnnMathType_t math() const {
    return options.precision == Precision::kFp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  }
  cudaStream_t stream() const { return ctx->stream(); }
};

using Shared = CudaBackend::Shared;
using Ins = absl::Span<const Tensor* const>;
using Outs = absl::Span<Tensor* const>;

// cuDNN takes alpha and beta as float for float, half and bf16 data.
const float kOne = 1.0f;
const float kZero = 0.0f;

inline const void* Ptr(const Tensor* t) { return t->raw(); }
inline void* Ptr(Tensor* t) { return t->raw(); }

// RAII wrappers of cuDNN descriptors.
class TensorDesc {
 public:
  TensorDesc() { COHORT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // An activation (N, C, H, W) in the backend's layout.
  void Set(const Shared& s, int64_t n, int64_t c, int64_t h, int64_t w) {
    COHORT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
        d_, s.nhwc() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, s.cudnn_type(), static_cast<int>(n),
        static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
  }
  void Set(const Shared& s, const Shape& x) { Set(s, x[0], x[1], x[2], x[3]); }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_;
};

// A ReLU for the ops cuDNN fuses one into.
class ReluDesc {
 public:
  ReluDesc() {
    COHORT_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d_));
    COHORT_CUDNN_CHECK(
        cudnnSetActivationDescriptor(d_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  ~ReluDesc() { cudnnDestroyActivationDescriptor(d_); }
  ReluDesc(const ReluDesc&) = delete;
  ReluDesc& operator=(const ReluDesc&) = delete;
  cudnnActivationDescriptor_t get() const { return d_; }

 private:
  cudnnActivationDescriptor_t d_;
};

// The shape an op last prepared for, so descriptors are rebuilt only when it changes.
class LastShape {
 public:
  // True (and remembers s) when s differs from the last one.
  bool Changed(const Shape& s) {
    if (valid_ && s == shape_) return false;
    shape_ = s;
    valid_ = true;
    return true;
  }

 private:
  Shape shape_;
  bool valid_ = false;
};

inline void CopyOnStream(const Shared& s, void* dst, const void* src, size_t bytes) {
  COHORT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.stream()));
}

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_CUDA_BACKEND_SHARED_H_
