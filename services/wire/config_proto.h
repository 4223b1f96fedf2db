#ifndef COHORT_SERVICES_WIRE_CONFIG_PROTO_H_
#define COHORT_SERVICES_WIRE_CONFIG_PROTO_H_

#include "absl/status/statusor.h"
#include "proto/shard.pb.h"
#include "services/wire/shard_config.h"
#include "trainer/optim/optimizer_spec.h"

namespace cohort {

// The update rule on the wire: rank 0 sends it to the shards with their initial values.
v1::OptimizerConfig ToProto(const OptimizerSpec& spec);
absl::StatusOr<OptimizerSpec> FromProto(const v1::OptimizerConfig& config);

// A shard's settings on the wire: the first message of its init stream. Errors name the field.
v1::InitMessage::Config ToProto(const ShardConfig& config);
absl::StatusOr<ShardConfig> FromProto(const v1::InitMessage::Config& config);

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_CONFIG_PROTO_H_
