#include "services/wire/config_proto.h"

#include "trainer/base/status_macros.h"

namespace cohort {

v1::OptimizerConfig ToProto(const OptimizerSpec& spec) {
  v1::OptimizerConfig c;
  c.set_optimizer(spec.optimizer);
  const OptimizerOptions& o = spec.optimizer_options;
  c.set_momentum(o.momentum);
  c.set_weight_decay(o.weight_decay);
  c.set_beta1(o.beta1);
  c.set_beta2(o.beta2);
  c.set_eps(o.eps);
  const LrScheduleOptions& l = spec.lr_schedule;
  c.set_lr_schedule(std::string(LrScheduleKindName(l.kind)));
  c.set_base_lr(l.base_lr);
  c.set_epochs(l.epochs);
  c.set_steps_per_epoch(l.steps_per_epoch);
  c.set_warmup_epochs(l.warmup_epochs);
  c.set_step_factor(l.step_factor);
  for (double m : l.milestones) c.add_milestones(m);
  c.set_poly_power(l.poly_power);
  return c;
}

absl::StatusOr<OptimizerSpec> FromProto(const v1::OptimizerConfig& c) {
  OptimizerSpec spec;
  spec.optimizer = c.optimizer();
  OptimizerOptions& o = spec.optimizer_options;
  o.momentum = c.momentum();
  o.weight_decay = c.weight_decay();
  o.beta1 = c.beta1();
  o.beta2 = c.beta2();
  o.eps = c.eps();
  LrScheduleOptions& l = spec.lr_schedule;
  ASSIGN_OR_RETURN(l.kind, ParseLrScheduleKind(c.lr_schedule()));
  l.base_lr = c.base_lr();
  l.epochs = c.epochs();
  l.steps_per_epoch = c.steps_per_epoch();
  l.warmup_epochs = c.warmup_epochs();
  l.step_factor = c.step_factor();
  l.milestones.assign(c.milestones().begin(), c.milestones().end());
  l.poly_power = c.poly_power();
  return spec;
}

v1::InitMessage::Config ToProto(const ShardConfig& config) {
  v1::InitMessage::Config c;
  c.set_num_workers(config.num_workers);
  c.set_mode(std::string(KVStoreModeName(config.mode)));
  c.set_partition_fingerprint(config.partition_fingerprint);
  c.set_num_parts(config.num_parts);
  *c.mutable_optimizer() = ToProto(config.optimizer);
  c.mutable_auxiliary_keys()->Add(config.auxiliary_keys.begin(), config.auxiliary_keys.end());
  c.set_generation(config.generation);
  c.set_fusion_bytes(config.fusion_bytes);
  c.set_backup_address(config.backup_address);
  return c;
}

absl::StatusOr<ShardConfig> FromProto(const v1::InitMessage::Config& c) {
  ShardConfig config;
  config.num_workers = c.num_workers();
  ASSIGN_OR_RETURN(config.mode, ParseKVStoreMode(c.mode()));
  config.partition_fingerprint = c.partition_fingerprint();
  config.num_parts = c.num_parts();
  ASSIGN_OR_RETURN(config.optimizer, FromProto(c.optimizer()));
  config.auxiliary_keys.assign(c.auxiliary_keys().begin(), c.auxiliary_keys().end());
  config.generation = c.generation();
  config.fusion_bytes = c.fusion_bytes();
  config.backup_address = c.backup_address();
  return config;
}

}  // namespace cohort
