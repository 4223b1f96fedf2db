#include "services/common/optimizer_config.h"

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

}  // namespace cohort
