#ifndef COHORT_TRAINER_OPTIM_OPTIMIZER_SPEC_H_
#define COHORT_TRAINER_OPTIM_OPTIMIZER_SPEC_H_

#include <string>

#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer.h"

namespace cohort {

// An update rule as a kvstore hands it to where parameters are held (a shard, for the
// distributed types): the optimizer (name and options) and the learning-rate schedule.
struct OptimizerSpec {
  std::string optimizer = "sgd";
  OptimizerOptions optimizer_options;
  LrScheduleOptions lr_schedule;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_OPTIM_OPTIMIZER_SPEC_H_
