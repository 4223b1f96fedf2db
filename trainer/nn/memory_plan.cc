#include "trainer/nn/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace cohort {
namespace {

int64_t Aligned(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

bool LivesCross(const BufferLife& a, const BufferLife& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

MemoryPlan PlanMemory(absl::Span<const BufferLife> buffers, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Ties by first use, so equal buffers of a chain alternate between the same two places.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of the crossing ones
  for (size_t i : order) {
    const int64_t size = Aligned(buffers[i].bytes, alignment);
    taken.clear();
    for (size_t p : placed) {
      if (LivesCross(buffers[i], buffers[p])) {
        taken.emplace_back(plan.offsets[p], plan.offsets[p] + Aligned(buffers[p].bytes, alignment));
      }
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : taken) {
      if (begin - offset >= size) break;  // fits in the gap before this one
      offset = std::max(offset, end);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace cohort
