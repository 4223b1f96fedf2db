#include "trainer/ops/cuda/host_exchange.h"

#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/elem_of.h"

namespace cohort::cuda {
namespace {
cudaEvent_t NewEvent() {
  cudaEvent_t e;
  COHORT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

}  // namespace

HostExchange::HostExchange(CudaContext* ctx, std::vector<ParameterTensors> params,
                           LossScaleOptions loss_scale)
    : ctx_(ctx),
      scaler_(loss_scale),
      overflow_(Shape{static_cast<int64_t>(params.size())}, DType::kI32, ctx->allocator()),
      host_overflow_(Shape{static_cast<int64_t>(params.size())}, DType::kI32, PinnedAllocator()) {
  host_overflow_.SetZero();
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
  stepped_ = true;
  // The last copy out of the staging buffer and flag is done (HostGradient waited for it,
  // unless a kvstore error skipped that).
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), s.grad_copied, 0));
  if (scaler_.enabled()) {
    COHORT_CHECK(!s.device_f32.empty(), "loss scaling of fp32 gradients");
    int* overflow = static_cast<int*>(overflow_.raw()) + key;
    COHORT_CUDA_CHECK(cudaMemsetAsync(overflow, 0, sizeof(int), ctx.stream()));
    COHORT_CUDA_CHECK(UnscaleToF32(src, ElemOf(grad.dtype()), grad.numel(), 1.0f / scaler_.scale(),
                                   static_cast<float*>(s.device_f32.raw()), overflow,
                                   ctx.stream()));
    src = s.device_f32.raw();
  } else if (!s.device_f32.empty()) {
    // The last value upload through the staging buffer is ordered before this on the stream.
    COHORT_CUDA_CHECK(Cast(src, ElemOf(grad.dtype()), s.device_f32.raw(), Elem::kF32,
                           grad.numel(), ctx.stream()));
    src = s.device_f32.raw();
  }
  COHORT_CUDA_CHECK(cudaEventRecord(s.grad_computed, ctx.stream()));
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(ctx.copy_stream(), s.grad_computed, 0));
  COHORT_CUDA_CHECK(cudaMemcpyAsync(s.host_grad.raw(), src, s.host_grad.nbytes(),
                                    cudaMemcpyDeviceToHost, ctx.copy_stream()));
  if (scaler_.enabled()) {
    COHORT_CUDA_CHECK(cudaMemcpyAsync(host_overflow_.data<int32_t>() + key,
                                      overflow_.data<int32_t>() + key, sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, ctx.copy_stream()));
  }
  COHORT_CUDA_CHECK(cudaEventRecord(s.grad_copied, ctx.copy_stream()));
}

bool HostExchange::GradientArrived(int64_t key) { return EventDone(slots_[key].grad_copied); }

const Tensor& HostExchange::HostGradient(int64_t key) {
  Slot& s = slots_[key];
  COHORT_CUDA_CHECK(cudaEventSynchronize(s.grad_copied));
  s.zeroed = scaler_.enabled() && host_overflow_.data<int32_t>()[key] != 0;
  if (s.zeroed) {
    host_overflow_.data<int32_t>()[key] = 0;
    s.host_grad.SetZero();
    overflowed_ = true;
  }
  return s.host_grad;
}

float HostExchange::BeginStep() {
  if (stepped_) scaler_.Update(overflowed_);
  stepped_ = overflowed_ = false;
  return scaler_.scale();
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
