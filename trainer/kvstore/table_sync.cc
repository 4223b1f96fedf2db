#include "trainer/kvstore/table_sync.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort {

RankRows SumRowsByRank(absl::Span<const RankRows> by_rank, int64_t dim) {
  RowSum sum(dim);
  for (const RankRows& p : by_rank) sum.Add(p.ids, p.grads);
  if (by_rank.size() > 1) sum.Scale(1.0f / static_cast<float>(by_rank.size()));
  return std::move(sum).Release();
}

TableSync::TableSync(EmbeddingTable* table, int num_workers)
    : table_(table), num_workers_(num_workers), pushed_(num_workers), arrived_(num_workers) {}

absl::StatusOr<bool> TableSync::Push(int rank, int64_t step, absl::Span<const uint64_t> ids,
                                     absl::Span<const float> grads, float lr) {
  const TableSpec& spec = table_->spec();
  const size_t dim = static_cast<size_t>(spec.dim);
  const std::string where =
      absl::StrCat("table ", spec.name, ": worker ", rank, "'s rows for step ", step);
  if (rank < 0 || rank >= num_workers_) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the job has ", num_workers_, " workers"));
  }
  if (grads.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", grads.size(), " gradient floats for ", ids.size(), " rows of ", dim));
  }
  absl::MutexLock lock(&mu_);
  const int64_t next = table_->steps() + 1;
  if (step != next) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " came while the table is at step ", next,
                     ": every worker pushes every table's rows once a step, in order"));
  }
  if (arrived_[rank]) {
    return absl::FailedPreconditionError(absl::StrCat(where, " came twice"));
  }
  arrived_[rank] = 1;
  pushed_[rank].ids.assign(ids.begin(), ids.end());
  pushed_[rank].grads.assign(grads.begin(), grads.end());
  if (++count_ < num_workers_) return false;
  const RankRows step_rows = SumRowsByRank(pushed_, spec.dim);
  for (int r = 0; r < num_workers_; ++r) {
    arrived_[r] = 0;
    pushed_[r] = RankRows();
  }
  count_ = 0;
  if (absl::Status applied = table_->Apply(step_rows.ids, step_rows.grads, lr); !applied.ok()) {
    return applied;
  }
  return true;
}

absl::Status ApplyRowsAsync(EmbeddingTable* table, int num_workers, absl::Span<const uint64_t> ids,
                            absl::Span<const float> grads, float lr) {
  if (num_workers == 1) return table->Apply(ids, grads, lr);
  std::vector<float> scaled(grads.begin(), grads.end());
  const float scale = 1.0f / static_cast<float>(num_workers);
  for (float& g : scaled) g *= scale;
  return table->Apply(ids, scaled, lr);
}

}  // namespace cohort
