#ifndef COHORT_TRAINER_OPTIM_LR_SCHEDULE_H_
#define COHORT_TRAINER_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

enum class LrScheduleKind { kConstant, kStep, kCosine, kPoly };

// The kind a --lr_schedule value names: "constant", "step", "cosine" or "poly".
absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name);
// The --lr_schedule spelling of a kind (ParseLrScheduleKind's inverse).
absl::string_view LrScheduleKindName(LrScheduleKind kind);

struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double base_lr = 0.01;         // --lr
  int64_t epochs = 1;            // --epochs
  int64_t steps_per_epoch = 1;   // global steps (of the global batch) per epoch
  double warmup_epochs = 0;      // --warmup_epochs; may be fractional, 0 = no warm-up
  double step_factor = 0.1;      // step: the lr is multiplied by this at each milestone
  std::vector<double> milestones;  // step: in epochs from the start; empty = 50% and 75% of epochs
  double poly_power = 2;         // poly: the exponent
};

// The learning rate at each global step, the same on the trainer and on every shard. An epoch
// count e becomes step round(e × steps_per_epoch); total = epochs × steps_per_epoch; w = the
// warm-up's steps.
//   warm-up (step s < w): base × (s + 1) / w, a linear ramp (Goyal et al. 2017) from base/w at
//     step 0 to base at step w - 1, where the main schedule takes over at its starting value base.
//   main schedule, with progress p = (s - w) / (total - w) in [0, 1):
//     constant: base
//     step:     base × factor^(number of milestones at or before s); milestones count from step 0
//     cosine:   base × (1 + cos(π p)) / 2, down to 0
//     poly:     base × (1 - p)^power, down to 0
//   Steps past the end get the value at step total (0 for cosine and poly).
// A copyable value; thread-safe.
class LrSchedule {
 public:
  // InvalidArgument, naming the flag, unless base_lr > 0, epochs > 0, steps_per_epoch > 0, the
  // warm-up ends before training does, milestones (step) increase strictly and fall after the
  // warm-up and before the end, and factor (step) and power (poly) are > 0.
  static absl::StatusOr<LrSchedule> Create(const LrScheduleOptions& options);

  // The learning rate for the update made at global step `step` (counted from 0; >= 0).
  double At(int64_t step) const;

 private:
  LrSchedule(const LrScheduleOptions& options, int64_t total_steps, int64_t warmup_steps,
             std::vector<int64_t> milestone_steps);

  LrScheduleKind kind_;
  double base_lr_;
  double step_factor_;
  double poly_power_;
  int64_t total_steps_;
  int64_t warmup_steps_;
  std::vector<int64_t> milestone_steps_;
};

// The linear scaling rule (Goyal et al. 2017): a learning rate tuned for a batch of 256, scaled
// in proportion to the global batch (per-worker batch × workers): base_lr × global_batch / 256.
double LinearScaledLr(double base_lr, int64_t global_batch);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPTIM_LR_SCHEDULE_H_
