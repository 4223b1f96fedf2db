#include "trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/base/check.h"

namespace cohort {
namespace {

constexpr double kPi = 3.14159265358979323846;

int64_t EpochsToSteps(double epochs, int64_t steps_per_epoch) {
  return std::llround(epochs * static_cast<double>(steps_per_epoch));
}

}  // namespace

absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "step") return LrScheduleKind::kStep;
  if (name == "cosine") return LrScheduleKind::kCosine;
  if (name == "poly") return LrScheduleKind::kPoly;
  return absl::InvalidArgumentError(
      absl::StrCat("--lr_schedule=", name, ": expected constant, step, cosine or poly"));
}

absl::string_view LrScheduleKindName(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kStep:
      return "step";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kPoly:
      return "poly";
  }
  return "?";
}

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleOptions& o) {
  // Comparisons are written so that NaN fails them.
  if (!(o.base_lr > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--lr=", o.base_lr, ": must be > 0"));
  }
  if (o.epochs <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--epochs=", o.epochs, ": must be > 0"));
  }
  if (o.steps_per_epoch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.steps_per_epoch,
        " steps per epoch: must be > 0; is the global batch (--batch_size × workers) larger than "
        "the training set?"));
  }
  int64_t total = 0;
  if (__builtin_mul_overflow(o.epochs, o.steps_per_epoch, &total)) {
    return absl::InvalidArgumentError(absl::StrCat("--epochs=", o.epochs, " x ",
                                                   o.steps_per_epoch,
                                                   " steps per epoch: too many steps"));
  }
  // Epoch bounds first, so that rounding to steps stays in range; -1 marks a value outside them.
  auto to_steps = [&o](double epochs) {
    return epochs >= 0 && epochs < o.epochs ? EpochsToSteps(epochs, o.steps_per_epoch) : -1;
  };
  const int64_t warmup = to_steps(o.warmup_epochs);
  if (warmup < 0 || warmup >= total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--warmup_epochs=", o.warmup_epochs,
        ": must be >= 0 and end before training does (--epochs=", o.epochs, ", ",
        o.steps_per_epoch, " steps per epoch)"));
  }

  std::vector<int64_t> milestone_steps;
  if (o.kind == LrScheduleKind::kStep) {
    if (!(o.step_factor > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--lr_schedule=step: decay factor ", o.step_factor, " must be > 0"));
    }
    const std::vector<double> milestones =
        o.milestones.empty() ? std::vector<double>{0.5 * o.epochs, 0.75 * o.epochs}
                             : o.milestones;
    for (double m : milestones) {
      const int64_t step = to_steps(m);
      const int64_t previous = milestone_steps.empty() ? warmup : milestone_steps.back();
      if (step <= previous || step >= total) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--lr_schedule=step: milestones at epochs ", absl::StrJoin(milestones, ", "),
            " must increase, fall after the warm-up (--warmup_epochs=", o.warmup_epochs,
            ") and before the end (--epochs=", o.epochs, ")"));
      }
      milestone_steps.push_back(step);
    }
  }
  if (o.kind == LrScheduleKind::kPoly && !(o.poly_power > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr_schedule=poly: power ", o.poly_power, " must be > 0"));
  }
  return LrSchedule(o, total, warmup, std::move(milestone_steps));
}

LrSchedule::LrSchedule(const LrScheduleOptions& options, int64_t total_steps,
                       int64_t warmup_steps, std::vector<int64_t> milestone_steps)
    : kind_(options.kind),
      base_lr_(options.base_lr),
      step_factor_(options.step_factor),
      poly_power_(options.poly_power),
      total_steps_(total_steps),
      warmup_steps_(warmup_steps),
      milestone_steps_(std::move(milestone_steps)) {}

double LrSchedule::At(int64_t step) const {
  COHORT_CHECK(step >= 0, "global step %ld is negative", step);
  if (step < warmup_steps_) {
    return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  }
  step = std::min(step, total_steps_);
  const double progress = static_cast<double>(step - warmup_steps_) /
                          static_cast<double>(total_steps_ - warmup_steps_);
  switch (kind_) {
    case LrScheduleKind::kConstant:
      return base_lr_;
    case LrScheduleKind::kStep: {
      const auto passed = std::upper_bound(milestone_steps_.begin(), milestone_steps_.end(), step) -
                          milestone_steps_.begin();
      return base_lr_ * std::pow(step_factor_, static_cast<double>(passed));
    }
    case LrScheduleKind::kCosine:
      return base_lr_ * 0.5 * (1 + std::cos(kPi * progress));
    case LrScheduleKind::kPoly:
      return base_lr_ * std::pow(1 - progress, poly_power_);
  }
  COHORT_CHECK(false, "unknown LrScheduleKind %d", static_cast<int>(kind_));
  return 0;
}

double LinearScaledLr(double base_lr, int64_t global_batch) {
  return base_lr * static_cast<double>(global_batch) / 256;
}

}  // namespace cohort
