#include "trainer/optim/lr_schedule.h"

#include <cmath>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// 10 epochs of 100 steps: 1000 steps in all.
LrScheduleOptions TenEpochs(LrScheduleKind kind) {
  LrScheduleOptions o;
  o.kind = kind;
  o.base_lr = 0.4;
  o.epochs = 10;
  o.steps_per_epoch = 100;
  return o;
}

LrSchedule MustCreate(const LrScheduleOptions& options) {
  auto schedule = LrSchedule::Create(options);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *std::move(schedule);
}

TEST(ParseLrScheduleKindTest, NamesAndError) {
  EXPECT_EQ(*ParseLrScheduleKind("constant"), LrScheduleKind::kConstant);
  EXPECT_EQ(*ParseLrScheduleKind("step"), LrScheduleKind::kStep);
  EXPECT_EQ(*ParseLrScheduleKind("cosine"), LrScheduleKind::kCosine);
  EXPECT_EQ(*ParseLrScheduleKind("poly"), LrScheduleKind::kPoly);
  auto bad = ParseLrScheduleKind("linear");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "--lr_schedule=linear: expected constant, step, cosine or poly");
}

TEST(LrScheduleTest, Constant) {
  const LrSchedule s = MustCreate(TenEpochs(LrScheduleKind::kConstant));
  EXPECT_DOUBLE_EQ(s.At(0), 0.4);
  EXPECT_DOUBLE_EQ(s.At(999), 0.4);
  EXPECT_DOUBLE_EQ(s.At(5000), 0.4);
}

TEST(LrScheduleTest, StepDefaultsToHalfAndThreeQuartersOfTraining) {
  // Milestones at epochs 5 and 7.5: steps 500 and 750.
  const LrSchedule s = MustCreate(TenEpochs(LrScheduleKind::kStep));
  EXPECT_DOUBLE_EQ(s.At(0), 0.4);
  EXPECT_DOUBLE_EQ(s.At(499), 0.4);
  EXPECT_DOUBLE_EQ(s.At(500), 0.04);
  EXPECT_DOUBLE_EQ(s.At(749), 0.04);
  EXPECT_DOUBLE_EQ(s.At(750), 0.004);
  EXPECT_DOUBLE_EQ(s.At(999), 0.004);
  EXPECT_DOUBLE_EQ(s.At(100000), 0.004);
}

TEST(LrScheduleTest, StepWithExplicitMilestonesFactorAndWarmUp) {
  // Milestones count from step 0, not from the end of the 1-epoch warm-up.
  LrScheduleOptions o = TenEpochs(LrScheduleKind::kStep);
  o.milestones = {2, 6, 8.5};
  o.step_factor = 0.5;
  o.warmup_epochs = 1;
  const LrSchedule s = MustCreate(o);
  EXPECT_DOUBLE_EQ(s.At(0), 0.004);
  EXPECT_DOUBLE_EQ(s.At(99), 0.4);
  EXPECT_DOUBLE_EQ(s.At(100), 0.4);
  EXPECT_DOUBLE_EQ(s.At(199), 0.4);
  EXPECT_DOUBLE_EQ(s.At(200), 0.2);
  EXPECT_DOUBLE_EQ(s.At(600), 0.1);
  EXPECT_DOUBLE_EQ(s.At(849), 0.1);
  EXPECT_DOUBLE_EQ(s.At(850), 0.05);
  EXPECT_DOUBLE_EQ(s.At(1000), 0.05);
}

TEST(LrScheduleTest, Cosine) {
  const LrSchedule s = MustCreate(TenEpochs(LrScheduleKind::kCosine));
  EXPECT_DOUBLE_EQ(s.At(0), 0.4);
  EXPECT_DOUBLE_EQ(s.At(250), 0.4 * (0.5 + std::sqrt(2.0) / 4));  // (1 + cos(π/4)) / 2
  EXPECT_DOUBLE_EQ(s.At(500), 0.2);
  EXPECT_DOUBLE_EQ(s.At(750), 0.4 * (0.5 - std::sqrt(2.0) / 4));
  // The last step still learns; the end of training, and anything after it, is 0.
  EXPECT_GT(s.At(999), 0.0);
  EXPECT_LT(s.At(999), 1e-5);
  EXPECT_EQ(s.At(1000), 0.0);
  EXPECT_EQ(s.At(1001), 0.0);
  for (int64_t step = 1; step <= 1000; ++step) EXPECT_LT(s.At(step), s.At(step - 1)) << step;
}

TEST(LrScheduleTest, Poly) {
  const LrSchedule quadratic = MustCreate(TenEpochs(LrScheduleKind::kPoly));
  EXPECT_DOUBLE_EQ(quadratic.At(0), 0.4);
  EXPECT_DOUBLE_EQ(quadratic.At(500), 0.1);   // 0.4 × 0.5²
  EXPECT_DOUBLE_EQ(quadratic.At(900), 0.004);  // 0.4 × 0.1²
  EXPECT_EQ(quadratic.At(1000), 0.0);
  EXPECT_EQ(quadratic.At(2000), 0.0);
  for (int64_t step = 1; step <= 1000; ++step) {
    EXPECT_LT(quadratic.At(step), quadratic.At(step - 1)) << step;
  }

  LrScheduleOptions o = TenEpochs(LrScheduleKind::kPoly);
  o.poly_power = 1;
  const LrSchedule linear = MustCreate(o);
  EXPECT_DOUBLE_EQ(linear.At(250), 0.3);
  EXPECT_DOUBLE_EQ(linear.At(750), 0.1);
}

TEST(LrScheduleTest, WarmUpRampsToBaseThenHandsOff) {
  // 2 warm-up epochs = 200 steps: base × (s + 1) / 200, then cosine over steps [200, 1000).
  LrScheduleOptions o = TenEpochs(LrScheduleKind::kCosine);
  o.warmup_epochs = 2;
  const LrSchedule s = MustCreate(o);
  EXPECT_DOUBLE_EQ(s.At(0), 0.002);
  EXPECT_DOUBLE_EQ(s.At(1), 0.004);
  EXPECT_DOUBLE_EQ(s.At(99), 0.2);
  EXPECT_DOUBLE_EQ(s.At(199), 0.4);
  EXPECT_DOUBLE_EQ(s.At(200), 0.4);
  EXPECT_DOUBLE_EQ(s.At(600), 0.2);  // the cosine's midpoint
  EXPECT_EQ(s.At(1000), 0.0);
  for (int64_t step = 1; step < 200; ++step) EXPECT_GT(s.At(step), s.At(step - 1)) << step;
}

TEST(LrScheduleTest, FractionalWarmUpEpochsRoundToSteps) {
  // 1.5 epochs of 10 steps = 15 warm-up steps; 0.25 epochs of 10 = 2.5, rounded to 3.
  LrScheduleOptions o = TenEpochs(LrScheduleKind::kConstant);
  o.steps_per_epoch = 10;
  o.warmup_epochs = 1.5;
  const LrSchedule fifteen = MustCreate(o);
  EXPECT_DOUBLE_EQ(fifteen.At(0), 0.4 / 15);
  EXPECT_DOUBLE_EQ(fifteen.At(9), 0.4 * 10 / 15);
  EXPECT_DOUBLE_EQ(fifteen.At(14), 0.4);
  EXPECT_DOUBLE_EQ(fifteen.At(15), 0.4);

  o.warmup_epochs = 0.25;
  const LrSchedule three = MustCreate(o);
  EXPECT_DOUBLE_EQ(three.At(0), 0.4 / 3);
  EXPECT_DOUBLE_EQ(three.At(1), 0.4 * 2 / 3);
  EXPECT_DOUBLE_EQ(three.At(2), 0.4);
}

TEST(LrScheduleTest, RejectsBadOptionsNamingTheFlag) {
  auto expect_error = [](const LrScheduleOptions& o, absl::string_view message) {
    auto schedule = LrSchedule::Create(o);
    EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_EQ(schedule.status().message(), message);
  };
  LrScheduleOptions o = TenEpochs(LrScheduleKind::kCosine);
  o.base_lr = 0;
  expect_error(o, "--lr=0: must be > 0");

  o = TenEpochs(LrScheduleKind::kCosine);
  o.epochs = 0;
  expect_error(o, "--epochs=0: must be > 0");

  o = TenEpochs(LrScheduleKind::kCosine);
  o.steps_per_epoch = 0;
  expect_error(o,
               "0 steps per epoch: must be > 0; is the global batch (--batch_size × workers) "
               "larger than the training set?");

  o = TenEpochs(LrScheduleKind::kCosine);
  o.steps_per_epoch = int64_t{1} << 62;
  expect_error(o, "--epochs=10 x 4611686018427387904 steps per epoch: too many steps");

  o = TenEpochs(LrScheduleKind::kCosine);
  o.warmup_epochs = 10;
  expect_error(o,
               "--warmup_epochs=10: must be >= 0 and end before training does (--epochs=10, "
               "100 steps per epoch)");
  o.warmup_epochs = -1;
  expect_error(o,
               "--warmup_epochs=-1: must be >= 0 and end before training does (--epochs=10, "
               "100 steps per epoch)");
  o.warmup_epochs = 9.999;  // rounds to step 1000, the end
  expect_error(o,
               "--warmup_epochs=9.999: must be >= 0 and end before training does (--epochs=10, "
               "100 steps per epoch)");
  o.warmup_epochs = 9.99;  // the last step is left for the main schedule
  EXPECT_TRUE(LrSchedule::Create(o).ok());

  o = TenEpochs(LrScheduleKind::kStep);
  o.warmup_epochs = 6;  // after the default milestone at epoch 5
  expect_error(o,
               "--lr_schedule=step: milestones at epochs 5, 7.5 must increase, fall after the "
               "warm-up (--warmup_epochs=6) and before the end (--epochs=10)");
  o.warmup_epochs = 0;
  o.milestones = {6, 3};
  expect_error(o,
               "--lr_schedule=step: milestones at epochs 6, 3 must increase, fall after the "
               "warm-up (--warmup_epochs=0) and before the end (--epochs=10)");
  o.milestones = {3, 10};
  expect_error(o,
               "--lr_schedule=step: milestones at epochs 3, 10 must increase, fall after the "
               "warm-up (--warmup_epochs=0) and before the end (--epochs=10)");
  o.milestones = {3};
  o.step_factor = 0;
  expect_error(o, "--lr_schedule=step: decay factor 0 must be > 0");

  o = TenEpochs(LrScheduleKind::kPoly);
  o.poly_power = -1;
  expect_error(o, "--lr_schedule=poly: power -1 must be > 0");
}

TEST(LinearScaledLrTest, ScalesWithTheGlobalBatch) {
  EXPECT_DOUBLE_EQ(LinearScaledLr(0.1, 256), 0.1);
  EXPECT_DOUBLE_EQ(LinearScaledLr(0.1, 8192), 3.2);  // Goyal et al.'s 8k-batch ResNet-50
  EXPECT_DOUBLE_EQ(LinearScaledLr(0.1, 64), 0.025);
}

}  // namespace
}  // namespace cohort
