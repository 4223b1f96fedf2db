#ifndef COHORT_TRAINER_KVSTORE_KVSTORE_H_
#define COHORT_TRAINER_KVSTORE_KVSTORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/kvstore/embedding_table.h"
#include "trainer/kvstore/kvstore_mode.h"
#include "trainer/kvstore/kvstore_recovery.h"
#include "trainer/optim/optimizer_spec.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// The parameter store a training loop talks to, as MXNet's kvstore: every parameter has a key
// (its index in model order); a worker pushes the gradient of its mean loss for a step and
// pulls the updated weights. Values are F32 tensors of a fixed shape per key. The k-th push of
// a key is applied with the schedule's learning rate at step k. Call SetOptimizer, then Init
// every key, then push and pull. Calls come from one thread at a time.
class KVStore {
 public:
  virtual ~KVStore() = default;

  virtual KVStoreMode mode() const = 0;
  // The mode's name, as --kv_store spells it.
  absl::string_view type() const { return KVStoreModeName(mode()); }
  virtual int rank() const = 0;
  virtual int num_workers() const = 0;

  // The update rule, as MXNet's set_optimizer. Distributed stores send rank 0's spec to the
  // shards; every rank must call it with the same spec.
  virtual absl::Status SetOptimizer(const OptimizerSpec& spec) = 0;
  // The learning rate of this worker's pushes from the next one on, in place of the update
  // rule's schedule (negative: the schedule's again): for a program whose own scheduler sets
  // the rate (a torch LR scheduler). Every worker sets the same rate at the same step.
  virtual absl::Status SetLearningRate(float lr) = 0;
  // Registers a key with its initial value (the same shape for every later call). Distributed
  // stores keep rank 0's value; every rank pulls it before training.
  virtual absl::Status Init(int64_t key, const Tensor& value) = 0;
  // Registers an auxiliary key: state that is not trained (batch-norm running statistics),
  // which the store averages across workers with no optimizer. PushPull(key, local, out)
  // writes into out the mean of the workers' pushes (dist_sync: the step's W pushes summed in
  // rank order, times 1/W; dist_async: of each worker's latest; local: the push itself).
  virtual absl::Status InitAuxiliary(int64_t key, const Tensor& value) = 0;
  // Pushes grad (the key's shape) as the key's next step and pulls the value it produces into
  // out, without waiting: both tensors belong to the kvstore until Wait(key) returns (don't
  // write grad or read out before). This is how a training step overlaps communication with
  // computation. The local store finishes at once.
  virtual absl::Status PushPull(int64_t key, const Tensor& grad, Tensor* out) = 0;
  // Returns once key's PushPull has written its out (at once when none is in flight).
  virtual absl::Status Wait(int64_t key) = 0;
  // As MXNet's push (grad may be reused on return: the distributed stores copy it).
  virtual absl::Status Push(int64_t key, const Tensor& grad) = 0;
  // Writes into out (the key's shape) the value the key's last Push produced, waiting for it;
  // with no Push outstanding, the current value.
  virtual absl::Status Pull(int64_t key, Tensor* out) = 0;
  // Returns when every worker has reached it.
  virtual absl::Status Barrier() = 0;

  // Embedding tables: row-sparse keys, as MXNet's row_sparse_pull. A table's rows are made
  // where they are kept, on first touch (embedding_table.h); a worker holds only those its
  // batch needs. Registers key as a table (after SetOptimizer: its rows' rule is the spec's
  // own, its rate the schedule's, or SetLearningRate's).
  virtual absl::Status InitTable(int64_t key, const TableSpec& spec);
  // The rows of ids into out (ids.size() × dim F32, in ids' order).
  virtual absl::Status PullRows(int64_t key, absl::Span<const uint64_t> ids, Tensor* out);
  // The step's gradient of the table's rows of ids (ids.size() × dim F32; an id twice, or ids
  // sharing a fixed table's row, sum): each row touched is updated once with the step's
  // rate. dist_sync: the workers' rows summed by id in rank order, times 1/W, as their dense
  // pushes. grads may be reused on return.
  virtual absl::Status PushRows(int64_t key, absl::Span<const uint64_t> ids, const Tensor& grads);
  // A barrier that gathers: returns what every worker brought (payload), by rank, once every
  // one has reached it. Meant for small things (a metric, an object, rank 0's optimizer
  // state); the stores of one worker give the payload back.
  virtual absl::StatusOr<std::vector<std::string>> Exchange(std::string payload) {
    return std::vector<std::string>{std::move(payload)};
  }
  // How the store goes on when its job changes under it (kvstore_recovery.h); null: it has
  // nothing to recover from (the local store), and it starts at step 0.
  virtual KVStoreRecovery* recovery() { return nullptr; }
};

// OK when lr can be a SetLearningRate's: not infinite or NaN.
absl::Status CheckLearningRate(float lr);

// Makes the kvstore a --kv_store value names.
using KVStoreFactory =
    std::function<absl::StatusOr<std::unique_ptr<KVStore>>(absl::string_view type)>;

// "local": one process holds the parameters and applies each push at once. The distributed
// types (dist_sync, dist_async) come from the worker's runtime (services/worker/job_kvstore.h);
// here they are Unimplemented.
absl::StatusOr<std::unique_ptr<KVStore>> CreateKVStore(absl::string_view type);

}  // namespace cohort

#endif  // COHORT_TRAINER_KVSTORE_KVSTORE_H_
