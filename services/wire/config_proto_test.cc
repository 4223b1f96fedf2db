#include "services/wire/config_proto.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(ConfigProtoTest, EveryFieldRoundTrips) {
  OptimizerSpec spec;
  spec.optimizer = "adam";
  spec.optimizer_options = {0.8, 5e-4, 0.85, 0.995, 1e-7};
  spec.lr_schedule.kind = LrScheduleKind::kStep;
  spec.lr_schedule.base_lr = 0.3;
  spec.lr_schedule.epochs = 90;
  spec.lr_schedule.steps_per_epoch = 468;
  spec.lr_schedule.warmup_epochs = 2.5;
  spec.lr_schedule.step_factor = 0.2;
  spec.lr_schedule.milestones = {30, 60, 80};
  spec.lr_schedule.poly_power = 1.5;
  auto back = FromProto(ToProto(spec));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->optimizer, "adam");
  EXPECT_EQ(back->optimizer_options.momentum, 0.8);
  EXPECT_EQ(back->optimizer_options.weight_decay, 5e-4);
  EXPECT_EQ(back->optimizer_options.beta1, 0.85);
  EXPECT_EQ(back->optimizer_options.beta2, 0.995);
  EXPECT_EQ(back->optimizer_options.eps, 1e-7);
  // The schedule gives the same rate at every step on both ends.
  auto a = LrSchedule::Create(spec.lr_schedule);
  auto b = LrSchedule::Create(back->lr_schedule);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t step = 0; step < 90 * 468; step += 97) EXPECT_EQ(a->At(step), b->At(step)) << step;
}

TEST(ConfigProtoTest, UnknownScheduleIsAnError) {
  v1::OptimizerConfig c = ToProto(OptimizerSpec());
  c.set_lr_schedule("linear");
  EXPECT_FALSE(FromProto(c).ok());
}

TEST(ConfigProtoTest, ShardConfigRoundTrips) {
  ShardConfig config;
  config.num_workers = 3;
  config.mode = KVStoreMode::kDistAsync;
  config.partition_fingerprint = 0x1234567890abcdefULL;
  config.num_parts = 17;
  config.optimizer.optimizer = "adam";
  config.auxiliary_keys = {40, 41};
  config.generation = 5;
  config.fusion_bytes = 65536;
  config.backup_address = "10.0.0.2:7001";
  auto back = FromProto(ToProto(config));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->num_workers, 3);
  EXPECT_EQ(back->mode, KVStoreMode::kDistAsync);
  EXPECT_EQ(back->partition_fingerprint, 0x1234567890abcdefULL);
  EXPECT_EQ(back->num_parts, 17);
  EXPECT_EQ(back->optimizer.optimizer, "adam");
  EXPECT_EQ(back->auxiliary_keys, (std::vector<int64_t>{40, 41}));
  EXPECT_EQ(back->generation, 5);
  EXPECT_EQ(back->fusion_bytes, 65536);
  EXPECT_EQ(back->backup_address, "10.0.0.2:7001");
}

TEST(ConfigProtoTest, UnknownModeIsAnError) {
  v1::InitMessage::Config c = ToProto(ShardConfig());
  c.set_mode("dist_fast");
  EXPECT_FALSE(FromProto(c).ok());
}

}  // namespace
}  // namespace cohort
