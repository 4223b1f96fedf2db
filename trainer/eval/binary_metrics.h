#ifndef COHORT_TRAINER_EVAL_BINARY_METRICS_H_
#define COHORT_TRAINER_EVAL_BINARY_METRICS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace cohort {

// What a click model is judged by on an evaluation split.
// ROC AUC: the chance that a positive sample scores above a negative one, ties counting a half
// (the Mann-Whitney statistic, as scikit-learn's roc_auc_score). scores: any monotone score
// (a logit or a probability); labels: 0 or 1, the same count. Needs both classes.
absl::StatusOr<double> RocAuc(absl::Span<const float> scores, absl::Span<const int32_t> labels);

// The mean negative log-likelihood of the labels under the probabilities p (clipped to
// [1e-7, 1 - 1e-7], as Keras and the DLRM reference clip them).
absl::StatusOr<double> LogLoss(absl::Span<const float> p, absl::Span<const int32_t> labels);

}  // namespace cohort

#endif  // COHORT_TRAINER_EVAL_BINARY_METRICS_H_
