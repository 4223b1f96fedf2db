#ifndef COHORT_TRAINER_KVSTORE_KVSTORE_RECOVERY_H_
#define COHORT_TRAINER_KVSTORE_KVSTORE_RECOVERY_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/optim/optimizer_spec.h"

namespace cohort {

// How a store goes on when its job changes under it, apart from the data path (KVStore): a
// distributed store whose dead shard came back from a checkpoint, a job resumed from one, an
// elastic job whose workers changed. The training loop asks a store for it
// (KVStore::recovery); a store without one (the local store) starts at step 0 and has nothing
// to recover from. Calls come from the thread that calls the store.
class KVStoreRecovery {
 public:
  virtual ~KVStoreRecovery() = default;

  // The step the values pulled after Init are at: 0 for a new job; for a job whose shards
  // resumed from a checkpoint, the checkpoint's step, where training goes on. Call after
  // pulling every key.
  virtual absl::StatusOr<int64_t> StartStep() = 0;
  // After a call failed with `failure`: OK when the store has recovered and training goes on
  // from StartStep(), pulling every key first (a dead shard came back from a checkpoint, or an
  // elastic job's workers changed: the parameters went back to the newest checkpoint, and the
  // store's rank() and num_workers() may be others); otherwise the failure itself.
  virtual absl::Status Recover(const absl::Status& failure) = 0;
  // Without a failure: the store joins the job's current generation as every worker of it
  // does at once (an elastic program's reset): it commits (a worker that joined the running
  // job regroups with the others there), or, when it heard of a new generation, regroups as
  // Recover does; then the caller pulls and goes on from StartStep(). OK at once otherwise.
  virtual absl::Status CatchUp() = 0;
  // Whether the job's workers changed since the store's generation (its next call fails, and
  // CatchUp or Recover regroups).
  virtual bool WorkersChanged() const = 0;
  // The number of workers the job started with (an elastic job's changes).
  virtual int initial_num_workers() const = 0;
  // How the update rule follows the number of workers: an elastic store asks it for the spec
  // of the new number when the workers change (without one, the spec stays).
  using UpdateRuleFor = std::function<absl::StatusOr<OptimizerSpec>(int num_workers)>;
  virtual void SetUpdateRuleFor(UpdateRuleFor rule) = 0;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_KVSTORE_KVSTORE_RECOVERY_H_
