#ifndef COHORT_TRAINER_OPS_EMBEDDING_BAG_H_
#define COHORT_TRAINER_OPS_EMBEDDING_BAG_H_

#include <memory>

#include "trainer/ops/op.h"

namespace cohort {

// EmbeddingBag (op.h) over host tensors, in plain loops: bag b's rows summed in index order,
// then divided by their count for a mean; the rows' gradient is each bag's output gradient
// (divided likewise) added into its rows, bag by bag in order, so a row in several bags sums
// them in one fixed order. The reference every backend's embedding bag is held to.
std::unique_ptr<Op> MakeHostEmbeddingBag(const EmbeddingBagSpec& spec);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_EMBEDDING_BAG_H_
