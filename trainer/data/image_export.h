#ifndef COHORT_TRAINER_DATA_IMAGE_EXPORT_H_
#define COHORT_TRAINER_DATA_IMAGE_EXPORT_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "trainer/data/dataset.h"

namespace cohort {

// Writes a dataset held in memory as image datasets are kept on disk: DIR/<class>/<n>.jpg
// (torchvision's ImageFolder layout; classes and samples numbered from 0 and zero-padded, so
// name order is label order, then sample order) and the im2rec list DIR.lst beside the folder
// ("n<TAB>label<TAB>folder/<class>/<n>.jpg", in sample order). Grey images stay grey. The first
// `limit` samples only, when limit > 0. Says its progress on `progress`.
absl::Status WriteJpegFolder(const ImageDataset& data, const std::string& dir, int quality,
                             int64_t limit, std::ostream& progress);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_IMAGE_EXPORT_H_
