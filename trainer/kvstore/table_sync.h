#ifndef COHORT_TRAINER_KVSTORE_TABLE_SYNC_H_
#define COHORT_TRAINER_KVSTORE_TABLE_SYNC_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "trainer/kvstore/embedding_table.h"

namespace cohort {

// The rows of a step's W shares summed by row in rank order 0…W−1 (a rank without a row adds
// nothing; an id twice within a rank is summed there in order), times 1/W: each row once, in
// the order first seen. What a dist_sync shard applies, and what one process's device contexts
// give its store.
RankRows SumRowsByRank(absl::Span<const RankRows> by_rank, int64_t dim);

// dist_sync for one embedding table (Contracts, "Sparse rows"), on a shard over its workers or
// in one process over its device contexts: a step's update waits for one push of rows from
// every worker, sums each row's gradients over the workers in rank order 0…W−1
// (SumRowsByRank), and applies the table's rule once a row, whatever order the pushes came in.
// A row's sum is the same wherever its workers' batches put it, so the table ends as one
// process's would that summed the same W shares. Thread-safe.
class TableSync {
 public:
  // table outlives this.
  TableSync(EmbeddingTable* table, int num_workers);

  // rank's rows for step `step` (the table's next: table->steps() + 1): ids and their
  // gradients (ids.size() × dim; an id twice is summed). True when this push was the step's
  // last and the step is applied. A push of another step, or a second one from a rank, is
  // FailedPrecondition naming both, and changes nothing.
  absl::StatusOr<bool> Push(int rank, int64_t step, absl::Span<const uint64_t> ids,
                            absl::Span<const float> grads, float lr);

 private:
  EmbeddingTable* const table_;
  const int num_workers_;
  absl::Mutex mu_;
  std::vector<RankRows> pushed_ ABSL_GUARDED_BY(mu_);  // by rank, this step's
  std::vector<char> arrived_ ABSL_GUARDED_BY(mu_);     // by rank
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

// dist_async for a table: one worker's rows applied at once, scaled by 1/W (each push a step
// of the table's count; lr the schedule's at the pushes' step, ⌊pushes / W⌋).
absl::Status ApplyRowsAsync(EmbeddingTable* table, int num_workers, absl::Span<const uint64_t> ids,
                            absl::Span<const float> grads, float lr);

}  // namespace cohort

#endif  // COHORT_TRAINER_KVSTORE_TABLE_SYNC_H_
