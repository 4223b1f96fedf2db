#ifndef COHORT_SERVICES_WIRE_ROW_CODEC_H_
#define COHORT_SERVICES_WIRE_ROW_CODEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/shard.pb.h"

namespace cohort {

// What a v1::TableRows message says, checked.
struct TableRowsHeader {
  int64_t table = 0;
  int64_t step = 0;
  int rank = 0;
  int64_t generation = 0;
  int64_t dim = 0;
};

// Rows of one table on the wire (Contracts, "Sparse rows"): ids (ascending, each once) and
// their values, (ids.size(), dim) F32. The message is reused: its buffers are kept.
void EncodeRows(const TableRowsHeader& header, absl::Span<const uint64_t> ids,
                absl::Span<const float> values, v1::TableRows* out);

// The rows' ids and values into ids and values (resized). Refuses, naming the table and the
// rank: ids out of order or twice, a dim below 1, values that are not the ids' rows.
absl::StatusOr<TableRowsHeader> DecodeRows(const v1::TableRows& message, std::vector<uint64_t>* ids,
                                           std::vector<float>* values);

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_ROW_CODEC_H_
