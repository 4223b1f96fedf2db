#ifndef COHORT_SERVICES_COMMON_PART_CODEC_H_
#define COHORT_SERVICES_COMMON_PART_CODEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/shard.pb.h"
#include "services/common/part_id.h"

namespace cohort {

// A parameter part on the wire (Contracts, "Parts on the wire"): the header (key, part index,
// version, generation 0, dtype F32, byte count, pushing rank) and the values' bytes.
// The message is reused: its buffers are kept across calls.
void EncodePart(PartId id, int64_t version, int rank, absl::Span<const float> values,
                v1::Part* out);

struct DecodedPart {
  PartId id;
  int64_t version = 0;
  int rank = -1;
};

// Checks the header against the data and copies the values into out (resized). Errors name
// the key and part.
absl::StatusOr<DecodedPart> DecodePart(const v1::Part& part, std::vector<float>* out);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_PART_CODEC_H_
