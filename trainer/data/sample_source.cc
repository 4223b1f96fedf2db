#include "trainer/data/sample_source.h"

namespace cohort {

absl::Status InMemorySource::Gather(absl::Span<const int64_t> indices, const EpochKeys* train,
                                    Tensor* images, Tensor* labels) {
  const EpochAugmentation augment =
      train == nullptr ? EpochAugmentation{}
                       : EpochAugmentation{augmentation_, train->seed, train->epoch};
  GatherBatch(data_, indices, norm_, augment, images, labels);
  return absl::OkStatus();
}

}  // namespace cohort
