#ifndef COHORT_TRAINER_EVAL_ACCURACY_H_
#define COHORT_TRAINER_EVAL_ACCURACY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "trainer/data/sample_source.h"
#include "trainer/nn/model.h"

namespace cohort {

struct Accuracy {
  int64_t top1 = 0;
  int64_t top5 = 0;
  int64_t count = 0;

  double top1_percent() const { return count > 0 ? 100.0 * top1 / count : 0.0; }
  double top5_percent() const { return count > 0 ? 100.0 * top5 / count : 0.0; }
};

// Adds a batch to acc. A sample counts for top-k when fewer than k classes rank above its label;
// ties rank the lower class index first (as a stable sort of descending logits does).
// logits: (N, K) F32; labels: (N) I32.
void CountTopK(const Tensor& logits, const Tensor& labels, Accuracy* acc);

// Top-1/top-5 of the model over a whole split, in evaluation mode, batch by batch in order; a
// sample that cannot be read is the error.
absl::StatusOr<Accuracy> Evaluate(Model* model, SampleSource* data, int64_t batch);

}  // namespace cohort

#endif  // COHORT_TRAINER_EVAL_ACCURACY_H_
