#ifndef COHORT_TRAINER_NN_MEMORY_PLAN_H_
#define COHORT_TRAINER_NN_MEMORY_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace cohort {

// A buffer a step needs from moment `first` to moment `last` (both included: what an op reads
// and what it writes at one moment never share memory).
struct BufferLife {
  int64_t bytes = 0;
  int first = 0;
  int last = 0;
};

// Where each buffer lies in one arena: byte offsets (multiples of `alignment`) such that no
// two buffers alive at a common moment overlap, and the arena's size.
struct MemoryPlan {
  std::vector<int64_t> offsets;
  int64_t arena_bytes = 0;
};

// Greedy by size (TensorFlow Lite's arena planner): the largest buffers are placed first, each
// at the lowest offset clear of the buffers already placed whose lives cross its own.
MemoryPlan PlanMemory(absl::Span<const BufferLife> buffers, int64_t alignment = 64);

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_MEMORY_PLAN_H_
