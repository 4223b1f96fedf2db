#ifndef COHORT_TRAINER_OPS_LOSS_SCALER_H_
#define COHORT_TRAINER_OPS_LOSS_SCALER_H_

namespace cohort {

struct LossScaleOptions {
  bool enabled = false;
  float initial_scale = 65536.0f;
  int growth_interval = 2000;
};

// The scale of dynamic loss scaling for fp16 (it moves as PyTorch's GradScaler's does): the
// loss gradient is multiplied by scale() so that small gradients survive fp16; a step whose
// gradients overflowed halves it, and growth_interval clean steps in a row double it. What an
// overflowing step updates is its user's choice (DeviceSgd skips it; a kvstore exchange
// pushes zeros for the overflowed keys). Not thread-safe.
class LossScaler {
 public:
  explicit LossScaler(LossScaleOptions options)
      : options_(options), scale_(options.enabled ? options.initial_scale : 1.0f) {}

  bool enabled() const { return options_.enabled; }
  // What the loss gradient is multiplied by (1 when disabled).
  float scale() const { return scale_; }

  // After each step, whether any of its gradients held an Inf or NaN.
  void Update(bool overflow) {
    if (!options_.enabled) return;
    if (overflow) {
      scale_ /= 2;
      clean_steps_ = 0;
    } else if (++clean_steps_ == options_.growth_interval) {
      scale_ *= 2;
      clean_steps_ = 0;
    }
  }

 private:
  LossScaleOptions options_;
  float scale_;
  int clean_steps_ = 0;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_LOSS_SCALER_H_
