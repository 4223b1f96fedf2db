#ifndef COHORT_TRAINER_OPS_CUDA_HOST_EXCHANGE_H_
#define COHORT_TRAINER_OPS_CUDA_HOST_EXCHANGE_H_

#include <cuda_runtime.h>

#include <vector>

#include "trainer/ops/cuda/cuda_context.h"
#include "trainer/ops/loss_scaler.h"
#include "trainer/ops/op.h"

namespace cohort::cuda {

// Carries a GPU model's parameters to and from a kvstore on the host, which holds fp32 values
// (the master weights) whatever the GPU stores.
//  - Gradients leave as soon as the model's gradient-ready hook reports them: SendGradient
//    queues, behind the backward work already on the compute stream, the cast to fp32 and then
//    a copy into the key's pinned fp32 buffer on the copy stream, so the compute stream goes on
//    with the next layers' backward meanwhile. HostGradient waits for that key's copy alone.
//  - Pulled values come back the other way: the kvstore writes HostValue(key) (pinned fp32);
//    ReceiveValue queues the copy up and the cast into the parameter on the compute stream,
//    after the work that still reads the old value and before the next forward's.
// With loss scaling (fp16), gradients are unscaled in the cast and checked: a key whose
// gradient overflowed pushes zeros (in a dist_sync job every worker must push every key, so a
// step cannot be skipped as a single process would), and the next step's scale is halved.
// Keys are indices into the parameter list (kvstore keys). Used from one thread.
class HostExchange final : public ParameterExchange {
 public:
  // ctx: the GPU context of the backend the parameters belong to.
  HostExchange(CudaContext* ctx, std::vector<ParameterTensors> params,
               LossScaleOptions loss_scale = {});
  ~HostExchange() override;
  HostExchange(const HostExchange&) = delete;
  HostExchange& operator=(const HostExchange&) = delete;

  float BeginStep() override;
  void SendGradient(int64_t key) override;
  bool GradientArrived(int64_t key) override;
  // The key's gradient in fp32 on the host, once SendGradient's copy has landed.
  const Tensor& HostGradient(int64_t key) override;
  bool GradientZeroed(int64_t key) override { return slots_[key].zeroed; }
  // Where the kvstore writes the key's next value (free once the last upload has read it).
  Tensor* HostValue(int64_t key) override;
  void ReceiveValue(int64_t key) override;

 private:
  struct Slot {
    ParameterTensors param;
    Tensor device_f32;  // fp32 staging on the GPU for 16-bit parameters (empty for fp32)
    Tensor host_grad, host_value;  // pinned fp32
    cudaEvent_t grad_computed = nullptr, grad_copied = nullptr, value_read = nullptr;
    bool zeroed = false;  // the last HostGradient: zeros for an overflow
  };

  CudaContext* ctx_;
  std::vector<Slot> slots_;
  LossScaler scaler_;
  Tensor overflow_;       // per key, one int on the device: its gradient held an Inf or NaN
  Tensor host_overflow_;  // pinned copies
  bool stepped_ = false, overflowed_ = false;  // in the step since the last BeginStep
};

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_HOST_EXCHANGE_H_
