#ifndef COHORT_SERVICES_SHARD_SHARD_CORE_TESTING_H_
#define COHORT_SERVICES_SHARD_SHARD_CORE_TESTING_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "services/shard/shard_core.h"

namespace cohort {

// For ShardCore's tests: what a worker's stream receives, a job's config, gradients, and
// checkpoints kept in memory.

// Records what a worker's stream would receive.
class RecordingSink final : public PartSink {
 public:
  void Send(PartId id, int64_t version, absl::Span<const float> value, PinCount*) override {
    absl::MutexLock lock(&mu_);
    ids.push_back(id);
    versions.push_back(version);
    values.emplace_back(value.begin(), value.end());
  }
  absl::Mutex mu_;
  std::vector<PartId> ids;
  std::vector<int64_t> versions;
  std::vector<std::vector<float>> values;
};

// A config with momentum, weight decay and a cosine schedule over 4 steps an epoch.
inline ShardConfig Config(int workers, KVStoreMode mode, int parts = 1) {
  ShardConfig c;
  c.num_workers = workers;
  c.mode = mode;
  c.num_parts = parts;
  c.optimizer.optimizer = "sgd";
  c.optimizer.optimizer_options.momentum = 0.9;
  c.optimizer.optimizer_options.weight_decay = 0.01;
  c.optimizer.lr_schedule.kind = LrScheduleKind::kCosine;
  c.optimizer.lr_schedule.base_lr = 0.5;
  c.optimizer.lr_schedule.steps_per_epoch = 4;
  return c;
}

// A gradient that differs by rank, step and element.
inline std::vector<float> Gradient(int rank, int step, size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = 0.1f * rank - 0.37f * step + 0.013f * i + 1.0f / (3 + rank);
  return g;
}

// Keeps every part given at a checkpoint step, by step.
class MemoryCheckpoints final : public CheckpointSink {
 public:
  void Configured(const ShardConfig& config) override { configured = config; }
  void Holds(int share) override {
    absl::MutexLock lock(&mu);
    ++held[share];
  }
  void Add(int64_t step, int share, PartCheckpoint part) override {
    absl::MutexLock lock(&mu);
    ShardCheckpoint& c = steps[step];
    c.step = step;
    c.mode = std::string(KVStoreModeName(configured.mode));
    c.num_workers = configured.num_workers;
    c.partition_fingerprint = configured.partition_fingerprint;
    c.parts.push_back(std::move(part));
    shares[step].push_back(share);
  }
  void RolledBack(int64_t step) override {
    absl::MutexLock lock(&mu);
    steps.erase(steps.upper_bound(step), steps.end());
    shares.erase(shares.upper_bound(step), shares.end());
  }
  ShardConfig configured;
  absl::Mutex mu;
  std::map<int, int> held;                        // parts held, by share
  std::map<int64_t, ShardCheckpoint> steps;        // every part given, by step
  std::map<int64_t, std::vector<int>> shares;      // the share of each of them, in order
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_CORE_TESTING_H_
