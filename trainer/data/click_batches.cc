#include "trainer/data/click_batches.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<ClickBatchReader>> ClickBatchReader::Open(const std::string& path,
                                                                         int64_t batch, int rank,
                                                                         int num_workers,
                                                                         ClickLogOptions options) {
  if (batch < 1 || num_workers < 1 || rank < 0 || rank >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("click batches of ", batch, " for rank ", rank,
                                                   " of ", num_workers, " workers"));
  }
  absl::StatusOr<std::unique_ptr<ClickLogReader>> log = ClickLogReader::Open(path, options);
  if (!log.ok()) return log.status();
  return std::unique_ptr<ClickBatchReader>(
      new ClickBatchReader(*std::move(log), batch, rank, num_workers));
}

ClickBatchReader::ClickBatchReader(std::unique_ptr<ClickLogReader> log, int64_t batch, int rank,
                                   int num_workers)
    : log_(std::move(log)), batch_(batch), rank_(rank), num_workers_(num_workers) {}

absl::StatusOr<bool> ClickBatchReader::Next(ClickBatch* out) {
  out->size = 0;
  out->dense.clear();
  out->ids.clear();
  out->labels.clear();
  const int64_t first = rank_ * batch_;
  ClickRecord r;
  for (int64_t i = 0; i < batch_ * num_workers_; ++i) {
    absl::StatusOr<bool> more = log_->Next(&r);
    if (!more.ok()) return more.status();
    if (!*more) return false;  // a short last step
    if (i < first || i >= first + batch_) continue;
    for (int j = 0; j < kClickIntegerFeatures; ++j) {
      out->dense.push_back(ClickIntegerInput(r.integers[j]));
    }
    for (int f = 0; f < kClickCategoricalFeatures; ++f) {
      out->ids.push_back(ClickFeatureId(f, r.categories[f]));
    }
    out->labels.push_back(r.label);
    ++out->size;
  }
  ++steps_;
  return true;
}

}  // namespace cohort
