#ifndef COHORT_TRAINER_KVSTORE_PARTITION_H_
#define COHORT_TRAINER_KVSTORE_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace cohort {

// One parameter tensor as the kvstore sees it: its key is its index in model order.
struct TensorSize {
  int64_t elements = 0;
  int64_t element_bytes = 4;
};

// A contiguous slice of one tensor held by one shard.
struct Part {
  int64_t key = 0;     // the tensor
  int index = 0;       // the part's number within the tensor, from 0
  int64_t offset = 0;  // first element
  int64_t elements = 0;
  int64_t bytes = 0;
  int shard = 0;
};

// Where every byte of every parameter lives (Contracts, "Data path"). Every node computes it
// from the same inputs; the scheduler publishes its fingerprint so mismatches are caught.
struct PartitionMap {
  int num_shards = 0;
  std::vector<Part> parts;                  // by key, then part index
  std::vector<std::vector<int>> key_parts;  // key -> indices into parts, in order
  std::vector<int64_t> shard_bytes;         // bytes held by each shard

  // A stable 64-bit digest of the whole map (parts and their shards).
  uint64_t Fingerprint() const;
};

// Splits tensors larger than part_bytes into near-equal parts of at most part_bytes (whole
// elements), splits further while there are fewer parts than shards (so no shard holds every
// parameter when S > 1 and the tensors allow it), then gives each part, largest first, to the
// shard holding the fewest bytes so far (ties: lower part order, lower shard). A pure function
// of its arguments. InvalidArgument for no shards, a non-positive part size or element size, or
// an empty tensor, naming the key.
absl::StatusOr<PartitionMap> PartitionParameters(absl::Span<const TensorSize> tensors,
                                                 int num_shards, int64_t part_bytes);

}  // namespace cohort

#endif  // COHORT_TRAINER_KVSTORE_PARTITION_H_
