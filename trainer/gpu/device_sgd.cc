#include "trainer/gpu/device_sgd.h"

#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/elem_of.h"
#include "trainer/ops/cuda/sgd_update.h"

namespace cohort::cuda {
namespace {
float* F32(Tensor& t) { return static_cast<float*>(t.raw()); }

}  // namespace

DeviceSgd::DeviceSgd(CudaBackend* backend, std::vector<Parameter*> params, SgdOptions options,
                     LossScaleOptions loss_scale)
    : backend_(backend),
      options_(options),
      scaler_(loss_scale),
      overflow_(Shape{1}, DType::kI32, backend->allocator()),
      host_overflow_(Shape{1}, DType::kI32, PinnedAllocator()) {
  Allocator* a = backend->allocator();
  cudaStream_t stream = backend->context()->stream();
  for (Parameter* p : params) {
    Slot s{p, Tensor(Shape{0}, DType::kF32, a), Tensor(p->value.shape(), DType::kF32, a),
           Tensor(Shape{0}, DType::kF32, a)};
    s.velocity.SetZero();
    const bool f32 = p->value.dtype() == DType::kF32;
    if (!f32) {
      s.master.Resize(p->value.shape());
      COHORT_CUDA_CHECK(Cast(p->value.raw(), ElemOf(p->value.dtype()), s.master.raw(), Elem::kF32,
                             p->value.numel(), stream));
    }
    if (!f32 || loss_scale.enabled) s.grad.Resize(p->value.shape());
    slots_.push_back(std::move(s));
  }
}

DeviceSgd::~DeviceSgd() { backend_->context()->Synchronize(); }

bool DeviceSgd::Step(float lr) {
  cudaStream_t stream = backend_->context()->stream();
  int* overflow = static_cast<int*>(overflow_.raw());
  if (scaler_.enabled()) COHORT_CUDA_CHECK(cudaMemsetAsync(overflow, 0, sizeof(int), stream));
  for (Slot& s : slots_) {
    if (s.grad.empty()) continue;
    const Tensor& g = s.param->grad;
    if (scaler_.enabled()) {
      COHORT_CUDA_CHECK(UnscaleToF32(g.raw(), ElemOf(g.dtype()), g.numel(), 1.0f / scaler_.scale(),
                                     F32(s.grad), overflow, stream));
    } else {
      COHORT_CUDA_CHECK(
          Cast(g.raw(), ElemOf(g.dtype()), s.grad.raw(), Elem::kF32, g.numel(), stream));
    }
  }
  if (scaler_.enabled()) {
    COHORT_CUDA_CHECK(cudaMemcpyAsync(host_overflow_.raw(), overflow, sizeof(int),
                                      cudaMemcpyDeviceToHost, stream));
    COHORT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const bool overflow = host_overflow_.data<int32_t>()[0] != 0;
    scaler_.Update(overflow);
    if (overflow) return false;
  }
  for (Slot& s : slots_) {
    Tensor& w = s.param->value;
    float* master = s.master.empty() ? F32(w) : F32(s.master);
    const float* grad = s.grad.empty() ? static_cast<const float*>(s.param->grad.raw())
                                       : F32(s.grad);
    COHORT_CUDA_CHECK(SgdMomentumUpdate(master, F32(s.velocity), grad, w.numel(), lr,
                                        options_.momentum, options_.weight_decay, stream));
    if (!s.master.empty()) {
      COHORT_CUDA_CHECK(Cast(master, Elem::kF32, w.raw(), ElemOf(w.dtype()), w.numel(), stream));
    }
  }
  return true;
}

}  // namespace cohort::cuda
