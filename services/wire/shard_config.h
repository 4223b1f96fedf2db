#ifndef COHORT_SERVICES_WIRE_SHARD_CONFIG_H_
#define COHORT_SERVICES_WIRE_SHARD_CONFIG_H_

#include <cstdint>
#include <vector>

#include "trainer/kvstore/kvstore_mode.h"
#include "trainer/optim/optimizer_spec.h"

namespace cohort {

// A shard's settings, which rank 0 sends it before the parts' initial values.
struct ShardConfig {
  int num_workers = 1;
  KVStoreMode mode = KVStoreMode::kDistSync;  // dist_sync | dist_async
  uint64_t partition_fingerprint = 0;
  int num_parts = 0;  // parts this shard holds
  OptimizerSpec optimizer;
  // Keys of state that is not trained (batch-norm running statistics): their pushes are
  // averaged across workers, with no optimizer.
  std::vector<int64_t> auxiliary_keys;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_SHARD_CONFIG_H_
