#ifndef COHORT_TRAINER_DATA_IDX_H_
#define COHORT_TRAINER_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cohort {

// An IDX array of unsigned bytes (the MNIST / Fashion-MNIST file format).
struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // row-major, prod(dims) bytes
};

// Reads an IDX file of unsigned bytes with `rank` dimensions, gzip-compressed or plain.
// Every problem — missing file, bad gzip stream, wrong magic, truncated data, trailing bytes —
// is an error naming the file and what is wrong.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int rank);

// An IDX array's plain bytes, checked as ReadIdx does (where: the file, for messages).
absl::StatusOr<IdxArray> DecodeIdx(absl::Span<const uint8_t> bytes, int rank,
                                   absl::string_view where);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_IDX_H_
