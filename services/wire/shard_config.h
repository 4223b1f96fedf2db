#ifndef COHORT_SERVICES_WIRE_SHARD_CONFIG_H_
#define COHORT_SERVICES_WIRE_SHARD_CONFIG_H_

#include <cstdint>
#include <string>
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
  // The job's membership generation: pushes of any other are refused (elastic jobs move it on
  // when their workers change).
  int64_t generation = 0;
  // Answers are fused into messages of at most this many bytes (0: one part a message).
  int64_t fusion_bytes = 0;
  // Replicated shards: the host:port of the shard backing up the parts this one leads, which
  // their updates go to ("": none).
  std::string backup_address;
};

// An elastic job's workers changed: the shards go back to a checkpoint and go on under the
// config's generation, number of workers and update rule, at `step` (the checkpoint's step
// renumbered for that number of workers: its position in the epoch is kept).
struct Regeneration {
  ShardConfig config;
  int64_t step = 0;
};

// What a shard could roll back to (an elastic job's workers changed), and how its steps are
// numbered.
struct ShardCheckpoints {
  std::vector<int64_t> steps;  // oldest first
  bool configured = false;     // rank 0 has initialised it
  // Its settings once configured; before, those of the checkpoint it resumed from (0: none).
  int num_workers = 0;
  int64_t steps_per_epoch = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_SHARD_CONFIG_H_
