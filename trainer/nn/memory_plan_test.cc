#include "trainer/nn/memory_plan.h"

#include <algorithm>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/base/random.h"

namespace cohort {
namespace {

// The largest sum of the bytes (64-aligned) of the buffers alive at one moment: the least any
// arena for them can be.
int64_t MostBytesAliveAtOnce(const std::vector<BufferLife>& buffers) {
  std::map<int, int64_t> change;  // moment → bytes starting (+) or ended the moment before (−)
  for (const BufferLife& b : buffers) {
    change[b.first] += (b.bytes + 63) / 64 * 64;
    change[b.last + 1] -= (b.bytes + 63) / 64 * 64;
  }
  int64_t alive = 0, most = 0;
  for (const auto& [moment, bytes] : change) {
    alive += bytes;
    most = std::max(most, alive);
  }
  return most;
}

// No two buffers alive at a common moment share a byte.
void ExpectNoOverlap(const std::vector<BufferLife>& buffers, const MemoryPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), buffers.size());
  for (size_t a = 0; a < buffers.size(); ++a) {
    EXPECT_EQ(plan.offsets[a] % 64, 0) << a;
    EXPECT_LE(plan.offsets[a] + buffers[a].bytes, plan.arena_bytes) << a;
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      const bool cross = buffers[a].first <= buffers[b].last && buffers[b].first <= buffers[a].last;
      const bool overlap = plan.offsets[a] < plan.offsets[b] + buffers[b].bytes &&
                           plan.offsets[b] < plan.offsets[a] + buffers[a].bytes;
      EXPECT_FALSE(cross && overlap) << "buffers " << a << " and " << b;
    }
  }
}

TEST(MemoryPlanTest, AChainAlternatesBetweenTwoPlaces) {
  // Each op reads the buffer before and writes the next: two are alive at any moment.
  std::vector<BufferLife> chain;
  for (int i = 0; i < 10; ++i) chain.push_back({1000, i, i + 1});
  const MemoryPlan plan = PlanMemory(chain);
  ExpectNoOverlap(chain, plan);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);
  EXPECT_EQ(MostBytesAliveAtOnce(chain), 2 * 1024);
}

TEST(MemoryPlanTest, BuffersWhoseLivesDoNotCrossShareMemory) {
  const std::vector<BufferLife> buffers = {{4096, 0, 3}, {64, 1, 2}, {4096, 4, 6}, {128, 5, 9}};
  const MemoryPlan plan = PlanMemory(buffers);
  ExpectNoOverlap(buffers, plan);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_EQ(plan.arena_bytes, 4096 + 128);
}

TEST(MemoryPlanTest, RandomLivesNeverOverlapAndStayNearTheLowerBound) {
  Rng rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferLife> buffers;
    const int count = 1 + static_cast<int>(rng.Uniform(0, 60));
    for (int i = 0; i < count; ++i) {
      const int first = static_cast<int>(rng.Uniform(0, 40));
      buffers.push_back({static_cast<int64_t>(rng.Uniform(1, 1 << 16)), first,
                         first + static_cast<int>(rng.Uniform(0, 8))});
    }
    const MemoryPlan plan = PlanMemory(buffers);
    ExpectNoOverlap(buffers, plan);
    const int64_t least = MostBytesAliveAtOnce(buffers);
    EXPECT_GE(plan.arena_bytes, least) << trial;
    int64_t total = 0;
    for (const BufferLife& b : buffers) total += (b.bytes + 63) / 64 * 64;
    EXPECT_LE(plan.arena_bytes, total) << trial;
  }
}

TEST(MemoryPlanTest, NoBuffersNeedNoArena) {
  EXPECT_EQ(PlanMemory({}).arena_bytes, 0);
  EXPECT_EQ(MostBytesAliveAtOnce({}), 0);
}

}  // namespace
}  // namespace cohort
