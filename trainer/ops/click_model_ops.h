#ifndef COHORT_TRAINER_OPS_CLICK_MODEL_OPS_H_
#define COHORT_TRAINER_OPS_CLICK_MODEL_OPS_H_

#include <memory>

#include "trainer/ops/op.h"

namespace cohort {

// What a click model (DLRM) needs beyond the embedding bag, over host tensors (F32 or F64) in
// plain loops: the reference every backend's is held to (op.h has their signatures).
// DotInteraction: each pair's dot product summed in d order; its backward adds each pair's
// share into both vectors, pair by pair in order.
std::unique_ptr<Op> MakeHostDotInteraction();
// BinaryCrossEntropy: max(z, 0) − z·y + log(1 + e^−|z|) per sample, summed in order, over N;
// its gradient (sigmoid(z) − y) / N.
std::unique_ptr<Op> MakeHostBinaryCrossEntropy();

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_CLICK_MODEL_OPS_H_
