#ifndef COHORT_TRAINER_GPU_DEVICE_SGD_H_
#define COHORT_TRAINER_GPU_DEVICE_SGD_H_

#include <vector>

#include "trainer/nn/layer.h"
#include "trainer/ops/loss_scaler.h"
#include "trainer/ops/cuda/cuda_backend.h"
#include "trainer/optim/optimizer.h"

namespace cohort::cuda {

// SGD with momentum (trainer/optim's formula) run where the parameters live, on the GPU, with
// fp32 master weights and momentum: fp32 parameters are their own master; 16-bit ones are
// refreshed from theirs after every update, so rounding never accumulates in the weights.
// Gradients are taken in fp32 (unscaled and checked when loss scaling is on: a step with an
// Inf or NaN is skipped). Everything is
// queued on the backend's compute stream without waiting, except the overflow check of a
// loss-scaled step. The single-GPU benchmark trains with it. Not thread-safe.
class DeviceSgd {
 public:
  // Takes the parameters' current values as the master weights: initialise or load them first.
  DeviceSgd(CudaBackend* backend, std::vector<Parameter*> params, SgdOptions options,
            LossScaleOptions loss_scale = {});
  ~DeviceSgd();
  DeviceSgd(const DeviceSgd&) = delete;
  DeviceSgd& operator=(const DeviceSgd&) = delete;

  // Updates every parameter from its gradient with learning rate lr. False when the step was
  // skipped because a gradient overflowed.
  bool Step(float lr);
  // What the loss gradient must be multiplied by for the next step (1 without loss scaling).
  float loss_scale() const { return scaler_.scale(); }

 private:
  struct Slot {
    Parameter* param;
    Tensor master;    // fp32 weights (empty when the parameter is fp32: it is its own master)
    Tensor velocity;  // fp32
    Tensor grad;      // fp32 gradient (empty when the parameter's own can be used)
  };

  CudaBackend* backend_;
  SgdOptions options_;
  LossScaler scaler_;
  std::vector<Slot> slots_;
  Tensor overflow_;       // one int on the device
  Tensor host_overflow_;  // and its pinned copy
};

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_GPU_DEVICE_SGD_H_
