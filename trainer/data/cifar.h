#ifndef COHORT_TRAINER_DATA_CIFAR_H_
#define COHORT_TRAINER_DATA_CIFAR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/dataset.h"

namespace cohort {

// The CIFAR-10 binary version: each record is 1 label byte (0–9) and 3072 pixel bytes
// (1024 R, 1024 G, 1024 B: C·H·W order, 3×32×32).
inline constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

// Reads CIFAR-10 binary batch files, in order, into one dataset of shape (3, 32, 32) with 10
// classes. Every problem is an error naming the file: missing (NotFound, with how to get it),
// empty, a size that is not a whole number of records, a label above 9 (with its record index
// and byte offset).
absl::StatusOr<ImageDataset> ReadCifar10(const std::vector<std::string>& paths,
                                         const std::string& name);

// One batch file's bytes, checked as ReadCifar10 does (where: the file, for messages), appended
// to d's labels and pixels.
absl::Status AppendCifar10Records(absl::Span<const uint8_t> bytes, absl::string_view where,
                                  ImageDataset* d);

// Loads data_batch_1.bin … data_batch_5.bin (train, 50,000 images) and test_batch.bin (test,
// 10,000) from dir or from its cifar-10-batches-bin/ subdirectory (where the archive unpacks).
absl::StatusOr<TrainTestData> LoadCifar10(const std::string& dir);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_CIFAR_H_
