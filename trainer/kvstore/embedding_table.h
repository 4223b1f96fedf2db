#ifndef COHORT_TRAINER_KVSTORE_EMBEDDING_TABLE_H_
#define COHORT_TRAINER_KVSTORE_EMBEDDING_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "trainer/optim/row_optimizer.h"

namespace cohort {

// What an embedding table is.
struct TableSpec {
  std::string name;  // in messages ("C7")
  int64_t dim = 16;  // floats a row
  // Fixed: `rows` rows, an id taken modulo rows (as the DLRM reference does). Collisionless:
  // a row of its own for every 64-bit id, up to `rows` of them (0: no limit).
  enum class Kind { kFixed, kCollisionless };
  Kind kind = Kind::kFixed;
  int64_t rows = 0;
  // Collisionless: an id gets its row the step it has been pushed in `admit_after` steps
  // (Monolith's frequency filter: a rare id costs no row); before, it reads as zeros and its
  // gradient is dropped. 1: at its first push.
  int admit_after = 1;
  // A new row's values: uniform in [-init_scale, init_scale), drawn from (seed, the table's
  // name, key) (Contracts, "Sparse rows"), so any process, any order of first touches, gives
  // the same bytes, and two tables of one seed start apart.
  uint64_t seed = 0;
  float init_scale = 0.01f;
  // The rows' update rule (MakeRowOptimizer): sgd, adagrad or lazy_adam.
  std::string optimizer = "adagrad";
};

// Rows and their gradients: ids and (ids.size() × dim) floats.
struct RankRows {
  std::vector<uint64_t> ids;
  std::vector<float> grads;
};

// Rows' gradients summed by id in the order added, each id once where it was first added: how
// a step's ids that share a row are coalesced, and its workers' rows summed in rank order.
class RowSum {
 public:
  explicit RowSum(int64_t dim) : dim_(static_cast<size_t>(dim)) {}
  // grads: ids.size() × dim.
  void Add(absl::Span<const uint64_t> ids, absl::Span<const float> grads);
  void Scale(float factor);
  size_t size() const { return rows_.ids.size(); }
  const RankRows& rows() const { return rows_; }
  RankRows Release() && { return std::move(rows_); }

 private:
  const size_t dim_;
  RankRows rows_;
  absl::flat_hash_map<uint64_t, size_t> index_;  // id -> its place in rows_
};

// Everything a table holds, for a checkpoint: restored into a table of the same spec and rule,
// its next steps are bitwise those the saved table would have made.
struct TableSnapshot {
  int64_t steps = 0;
  std::vector<uint64_t> keys;  // ascending
  std::vector<float> values;   // (keys.size(), dim)
  std::vector<float> state;    // (keys.size(), dim · the rule's state floats)
  // Collisionless with admit_after > 1: the ids not admitted yet and the steps they were
  // pushed in, ascending by id.
  std::vector<uint64_t> sighted;
  std::vector<int32_t> sightings;
};

// A table's rows where they are kept (a shard's share of them, or the local store's), created
// on first touch (memory grows with the rows touched, not with the table's size), each row's
// optimizer state beside it. It is given a step's gradient already summed over the workers in
// rank order and scaled, and applies the rule once a row. Thread-safe.
class EmbeddingTable {
 public:
  // rule outlives the table.
  EmbeddingTable(TableSpec spec, const RowOptimizer* rule);

  const TableSpec& spec() const { return spec_; }
  // The rows of ids into out (ids.size() × dim, in ids' order). A row not yet created reads as
  // its initial values (fixed table; collisionless, admitted) or zeros (not admitted yet): a
  // pull creates nothing, so only pushes decide what the table holds.
  absl::Status Pull(absl::Span<const uint64_t> ids, absl::Span<float> out) const;
  // One step's update: grads (ids.size() × dim) the ids' gradients (ids sharing a row summed
  // in the order given, once a row). Creates the rows
  // admitted, counts a step's sighting for the others, and applies the rule to each row once
  // with lr; the table's step count moves on by one. A collisionless table at its row limit
  // refuses the whole step (ResourceExhausted naming the table and the limit), changing nothing.
  absl::Status Apply(absl::Span<const uint64_t> ids, absl::Span<const float> grads, float lr);

  int64_t steps() const;
  int64_t rows_held() const;
  // The rows' values and state, the bytes the table allocated for them.
  int64_t bytes_held() const;
  // Every row held, ascending by key (a fixed table's row index, a collisionless table's id),
  // with its values and state: what a checkpoint or an export writes.
  void ForEachRow(const std::function<void(uint64_t key, absl::Span<const float> values,
                                           absl::Span<const float> state)>& visit) const;
  TableSnapshot Snapshot() const;
  // Replaces everything the table holds with the snapshot's. InvalidArgument, changing
  // nothing, when its sizes do not fit the table's dim and rule, its keys are not ascending and
  // unique, or it holds more rows than a collisionless table's limit.
  absl::Status Restore(const TableSnapshot& snapshot);

 private:
  static constexpr int64_t kRowsPerBlock = 1 << 14;
  // The key of an id: its row index (fixed), or itself (collisionless).
  uint64_t KeyOf(uint64_t id) const;
  // A new row's values for key, into out (dim floats).
  void InitialValues(uint64_t key, absl::Span<float> out) const;
  // The row's floats (its values, then its state); -1: none.
  int64_t SlotOf(uint64_t key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  float* Row(int64_t slot) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A new row for key, its values and state initialised.
  int64_t NewRow(uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TableSpec spec_;
  const uint64_t name_hash_;  // of spec_.name, a new row's key with the seed
  const RowOptimizer* const rule_;
  const int64_t stride_;  // floats a row: dim · (1 + the rule's state floats)
  mutable absl::Mutex mu_;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, int64_t> slots_ ABSL_GUARDED_BY(mu_);  // key -> slot
  std::vector<uint64_t> keys_ ABSL_GUARDED_BY(mu_);                    // slot -> key
  // Rows in blocks of kRowsPerBlock: growing never moves a row.
  std::vector<std::unique_ptr<float[]>> blocks_ ABSL_GUARDED_BY(mu_);
  // Collisionless with admit_after > 1: the steps each id not admitted yet was pushed in.
  absl::flat_hash_map<uint64_t, int> sightings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_TRAINER_KVSTORE_EMBEDDING_TABLE_H_
