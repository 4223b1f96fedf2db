#ifndef COHORT_TRAINER_DATA_CLICK_BATCHES_H_
#define COHORT_TRAINER_DATA_CLICK_BATCHES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/click_log.h"

namespace cohort {

// One rank's share of a step of a click log, as a click model takes it in.
struct ClickBatch {
  int64_t size = 0;             // samples
  std::vector<float> dense;     // (size, 13): ClickIntegerInput of each integer feature
  std::vector<uint64_t> ids;    // (size, 26): ClickFeatureId of each categorical feature
  std::vector<int32_t> labels;  // (size)
};

// A click log read in its order, one pass, step by step as the Contracts' sampler splits a
// step: step s covers records [s·W·b, (s+1)·W·b) and rank r takes [r·b, (r+1)·b) of them, so a
// single process with batch W·b sees the same samples in the same order. A last step short of
// W·b records is dropped. Every rank reads (and checks) every line, so with skip_corrupt all
// skip the same ones; memory is one step's records. Not thread-safe.
class ClickBatchReader {
 public:
  static absl::StatusOr<std::unique_ptr<ClickBatchReader>> Open(const std::string& path,
                                                                int64_t batch, int rank,
                                                                int num_workers,
                                                                ClickLogOptions options = {});
  // The rank's share of the next step into *out: true, or false once the log has no whole
  // step left. The reader's errors as ClickLogReader::Next's.
  absl::StatusOr<bool> Next(ClickBatch* out);
  // Steps read so far, and the log's lines skipped as malformed.
  int64_t steps() const { return steps_; }
  int64_t skipped() const { return log_->skipped(); }

 private:
  ClickBatchReader(std::unique_ptr<ClickLogReader> log, int64_t batch, int rank, int num_workers);

  const std::unique_ptr<ClickLogReader> log_;
  const int64_t batch_;
  const int rank_;
  const int num_workers_;
  int64_t steps_ = 0;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_CLICK_BATCHES_H_
