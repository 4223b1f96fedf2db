#ifndef COHORT_SERVICES_WORKER_DIST_KVSTORE_H_
#define COHORT_SERVICES_WORKER_DIST_KVSTORE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "services/membership/job_membership.h"
#include "services/worker/dist_kvstore_core.h"
#include "services/worker/shard_recovery.h"
#include "services/worker/shard_transport.h"
#include "trainer/kvstore/kvstore.h"

namespace cohort {

// The distributed kvstore ("dist_sync", "dist_async"), gRPC-free: its data path
// (DistKVStoreCore) and the data path's recovery (ShardRecovery) on a job membership and a
// transport to the shards. On the first push or pull (and its outcome ever after) it commits:
// every rank computes the partition map and, in generation 0, rank 0 sets the shards up and the
// streams open after a barrier; a worker that joined an elastic job whose workers changed
// regroups with the others in their generation instead. Recover hands a failure to the
// recovery (ShardRecovery::Recover says what it recovers from).
//
// Calls come from one thread (KVStore's contract).
class DistKVStore : public KVStore, public KVStoreRecovery {
 public:
  // mode: dist_sync or dist_async. membership outlives the store. shards: the view the
  // transport was dialled from (JobMembership::WaitForShards).
  DistKVStore(KVStoreMode mode, JobMembership* membership,
              std::unique_ptr<ShardTransport> transport, ShardsView shards,
              const DistKVStoreOptions& options);

  KVStoreMode mode() const override { return core_.mode(); }
  int rank() const override { return core_.rank(); }
  int num_workers() const override { return core_.num_workers(); }

  absl::Status SetOptimizer(const OptimizerSpec& spec) override;
  absl::Status SetLearningRate(float lr) override;
  absl::Status Init(int64_t key, const Tensor& value) override;
  absl::Status InitAuxiliary(int64_t key, const Tensor& value) override;
  absl::Status PushPull(int64_t key, const Tensor& grad, Tensor* out) override;
  absl::Status Wait(int64_t key) override;
  absl::Status Push(int64_t key, const Tensor& grad) override;
  absl::Status Pull(int64_t key, Tensor* out) override;
  absl::Status Barrier() override;
  absl::StatusOr<std::vector<std::string>> Exchange(std::string payload) override;
  KVStoreRecovery* recovery() override { return this; }

  // KVStoreRecovery.
  absl::StatusOr<int64_t> StartStep() override;
  absl::Status Recover(const absl::Status& failure) override;
  absl::Status CatchUp() override;
  bool WorkersChanged() const override;
  int initial_num_workers() const override { return core_.initial_num_workers(); }
  void SetUpdateRuleFor(UpdateRuleFor rule) override {
    recovery_.SetUpdateRuleFor(std::move(rule));
  }

 private:
  absl::Status Commit();

  DistKVStoreCore core_;
  ShardRecovery recovery_;
  bool committed_ = false;
  // How the commit went, or the last regroup: every later call fails with it when it failed.
  absl::Status standing_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_DIST_KVSTORE_H_
