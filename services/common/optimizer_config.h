#ifndef COHORT_SERVICES_COMMON_OPTIMIZER_CONFIG_H_
#define COHORT_SERVICES_COMMON_OPTIMIZER_CONFIG_H_

#include "absl/status/statusor.h"
#include "proto/shard.pb.h"
#include "trainer/kvstore/kvstore.h"

namespace cohort {

// The update rule on the wire: rank 0 sends it to the shards with their initial values.
v1::OptimizerConfig ToProto(const OptimizerSpec& spec);
absl::StatusOr<OptimizerSpec> FromProto(const v1::OptimizerConfig& config);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_OPTIMIZER_CONFIG_H_
