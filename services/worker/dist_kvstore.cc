#include "services/worker/dist_kvstore.h"

#include "trainer/base/status_macros.h"

namespace cohort {

DistKVStore::DistKVStore(KVStoreMode mode, JobMembership* membership,
                         std::unique_ptr<ShardTransport> transport, ShardsView shards,
                         const DistKVStoreOptions& options)
    : core_(mode, membership, std::move(transport), std::move(shards), options),
      recovery_(&core_, membership) {}

absl::Status DistKVStore::SetOptimizer(const OptimizerSpec& spec) {
  return core_.SetOptimizer(spec);
}

absl::Status DistKVStore::SetLearningRate(float lr) { return core_.SetLearningRate(lr); }

absl::Status DistKVStore::Init(int64_t key, const Tensor& value) { return core_.Init(key, value); }

absl::Status DistKVStore::InitAuxiliary(int64_t key, const Tensor& value) {
  return core_.InitAuxiliary(key, value);
}

absl::Status DistKVStore::PushPull(int64_t key, const Tensor& grad, Tensor* out) {
  RETURN_IF_ERROR(Commit());
  return core_.PushPull(key, grad, out);
}

absl::Status DistKVStore::Wait(int64_t key) {
  RETURN_IF_ERROR(Commit());
  return core_.Wait(key);
}

absl::Status DistKVStore::Push(int64_t key, const Tensor& grad) {
  RETURN_IF_ERROR(Commit());
  return core_.Push(key, grad);
}

absl::Status DistKVStore::Pull(int64_t key, Tensor* out) {
  RETURN_IF_ERROR(Commit());
  return core_.Pull(key, out);
}

absl::Status DistKVStore::Barrier() {
  RETURN_IF_ERROR(Commit());
  return core_.Barrier();
}

// Without a commit: keys may still be registered after an exchange (a Python worker's
// collectives come before its DistributedOptimizer makes them).
absl::StatusOr<std::vector<std::string>> DistKVStore::Exchange(std::string payload) {
  return core_.Exchange(std::move(payload));
}

absl::StatusOr<int64_t> DistKVStore::StartStep() { return core_.StartStep(); }

absl::Status DistKVStore::Recover(const absl::Status& failure) {
  if (!committed_) return failure;
  return recovery_.Recover(failure, &standing_);
}

absl::Status DistKVStore::CatchUp() {
  if (!committed_) return Commit();
  if (!WorkersChanged()) return standing_;
  // Recover regroups on the generation the core heard of.
  return recovery_.Recover(absl::AbortedError("the job's workers changed, said the scheduler"),
                           &standing_);
}

bool DistKVStore::WorkersChanged() const { return core_.interruption().newer_generation; }

absl::Status DistKVStore::Commit() {
  if (committed_) return standing_;
  if (!core_.has_keys()) return absl::FailedPreconditionError("kvstore used before any init");
  committed_ = true;
  standing_ = core_.Partition();
  if (!standing_.ok()) return standing_;
  // A worker of an elastic job whose workers changed since it started (one that joined it)
  // meets the others in their generation.
  standing_ = core_.shards().generation > 0 ? recovery_.Regroup() : core_.OpenStreams();
  return standing_;
}

}  // namespace cohort
