#include "trainer/ops/cuda/host_exchange.h"

#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/kernels.h"

namespace cohort::cuda {
namespace {

Elem ElemOf(DType dtype) {
  return dtype == DType::kBF16 ? Elem::kBF16 : dtype == DType::kF16 ? Elem::kF16 : Elem::kF32;
}

cudaEvent_t NewEvent() {
  cudaEvent_t e;
  COHORT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

}  // namespace

HostExchange::HostExchange(CudaContext* ctx, std::vector<ParameterTensors> params) : ctx_(ctx) {
  for (const ParameterTensors& p : params) {
    const Shape& shape = p.value->shape();
    Slot s{p,
           Tensor(p.value->dtype() == DType::kF32 ? Shape{0} : shape, DType::kF32,
                  ctx->allocator()),
           Tensor(shape, DType::kF32, PinnedAllocator()),
           Tensor(shape, DType::kF32, PinnedAllocator()),
           NewEvent(),
           NewEvent(),
           NewEvent()};
    // Recorded once so the first waits on them return at once.
    COHORT_CUDA_CHECK(cudaEventRecord(s.grad_copied, ctx->copy_stream()));
    COHORT_CUDA_CHECK(cudaEventRecord(s.value_read, ctx->stream()));
    slots_.push_back(std::move(s));
  }
}

HostExchange::~HostExchange() {
  ctx_->Synchronize();
  COHORT_CUDA_CHECK(cudaStreamSynchronize(ctx_->copy_stream()));
  for (Slot& s : slots_) {
    cudaEventDestroy(s.grad_computed);
    cudaEventDestroy(s.grad_copied);
    cudaEventDestroy(s.value_read);
  }
}

void HostExchange::SendGradient(int64_t key) {
  Slot& s = slots_[key];
  const CudaContext& ctx = *ctx_;
  const Tensor& grad = *s.param.grad;
  const void* src = grad.raw();
  if (!s.device_f32.empty()) {
    // The staging buffer is free: the last value upload through it is ordered before this on
    // the compute stream, and the last gradient copy from it was waited for by HostGradient.
    COHORT_CUDA_CHECK(Cast(src, ElemOf(grad.dtype()), s.device_f32.raw(), Elem::kF32,
                           grad.numel(), ctx.stream()));
    src = s.device_f32.raw();
  }
  COHORT_CUDA_CHECK(cudaEventRecord(s.grad_computed, ctx.stream()));
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(ctx.copy_stream(), s.grad_computed, 0));
  COHORT_CUDA_CHECK(cudaMemcpyAsync(s.host_grad.raw(), src, s.host_grad.nbytes(),
                                    cudaMemcpyDeviceToHost, ctx.copy_stream()));
  COHORT_CUDA_CHECK(cudaEventRecord(s.grad_copied, ctx.copy_stream()));
}

bool HostExchange::GradientArrived(int64_t key) {
  const cudaError_t status = cudaEventQuery(slots_[key].grad_copied);
  if (status == cudaErrorNotReady) return false;
  COHORT_CUDA_CHECK(status);
  return true;
}

const Tensor& HostExchange::HostGradient(int64_t key) {
  Slot& s = slots_[key];
  COHORT_CUDA_CHECK(cudaEventSynchronize(s.grad_copied));
  return s.host_grad;
}

Tensor* HostExchange::HostValue(int64_t key) {
  Slot& s = slots_[key];
  COHORT_CUDA_CHECK(cudaEventSynchronize(s.value_read));
  return &s.host_value;
}

void HostExchange::ReceiveValue(int64_t key) {
  Slot& s = slots_[key];
  const CudaContext& ctx = *ctx_;
  Tensor& value = *s.param.value;
  // The 16-bit staging buffer must not be overwritten before the gradient copy has read it.
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), s.grad_copied, 0));
  void* dst = s.device_f32.empty() ? value.raw() : s.device_f32.raw();
  COHORT_CUDA_CHECK(cudaMemcpyAsync(dst, s.host_value.raw(), s.host_value.nbytes(),
                                    cudaMemcpyHostToDevice, ctx.stream()));
  COHORT_CUDA_CHECK(cudaEventRecord(s.value_read, ctx.stream()));
  if (!s.device_f32.empty()) {
    COHORT_CUDA_CHECK(Cast(dst, Elem::kF32, value.raw(), ElemOf(value.dtype()), value.numel(),
                           ctx.stream()));
  }
}

}  // namespace cohort::cuda
