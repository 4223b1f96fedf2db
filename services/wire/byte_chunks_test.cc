#include "services/wire/byte_chunks.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// The floats 0.5·i, as bytes cut into chunks at random byte offsets, starting at an odd address.
struct Cut {
  std::vector<char> storage;
  std::vector<absl::Span<const char>> chunks;
};

Cut CutFloats(int count, uint32_t seed) {
  Cut cut;
  cut.storage.resize(count * sizeof(float) + 1);
  for (int i = 0; i < count; ++i) {
    const float v = 0.5f * static_cast<float>(i);
    std::memcpy(cut.storage.data() + 1 + i * sizeof(float), &v, sizeof(float));
  }
  std::mt19937 rng(seed);
  size_t at = 1;
  const size_t end = cut.storage.size();
  while (at < end) {
    const size_t n = std::min<size_t>(end - at, 1 + rng() % 23);
    cut.chunks.emplace_back(cut.storage.data() + at, n);
    at += n;
  }
  return cut;
}

TEST(ByteChunksTest, FloatBlocksSeeEveryValueOnceWhateverTheCuts) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    for (int count : {1, 7, 8, 64, 101}) {
      const Cut cut = CutFloats(count, seed);
      EXPECT_EQ(TotalBytes(cut.chunks), count * sizeof(float));
      std::vector<float> block(8), seen;
      std::vector<size_t> firsts;
      ForEachFloatBlock(cut.chunks, absl::MakeSpan(block),
                        [&](size_t first, absl::Span<const float> values) {
                          firsts.push_back(first);
                          EXPECT_EQ(values.data(), block.data());
                          seen.insert(seen.end(), values.begin(), values.end());
                        });
      ASSERT_EQ(seen.size(), static_cast<size_t>(count)) << "seed " << seed;
      for (int i = 0; i < count; ++i) EXPECT_EQ(seen[i], 0.5f * static_cast<float>(i));
      for (size_t b = 0; b < firsts.size(); ++b) EXPECT_EQ(firsts[b], 8 * b);
      std::vector<float> gathered(count);
      CopyChunks(cut.chunks, gathered.data());
      EXPECT_EQ(gathered, seen);
    }
  }
}

// One NaN or infinity anywhere, straddling a cut or not, is found; finite values (the largest,
// the smallest subnormal, negative zero) are not taken for one.
TEST(ByteChunksTest, AllFiniteFindsEveryNonFiniteValueWhateverTheCuts) {
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::signaling_NaN()};
  for (uint32_t seed = 0; seed < 20; ++seed) {
    for (int count : {1, 7, 64, 101}) {
      Cut cut = CutFloats(count, seed);
      EXPECT_TRUE(AllFinite(cut.chunks));
      const float finite[] = {std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::denorm_min(), -0.0f};
      std::memcpy(cut.storage.data() + 1 + (seed % count) * sizeof(float), &finite[seed % 3],
                  sizeof(float));
      EXPECT_TRUE(AllFinite(cut.chunks));
      const int at = static_cast<int>((seed * 7) % count);
      std::memcpy(cut.storage.data() + 1 + at * sizeof(float), &special[seed % 4], sizeof(float));
      EXPECT_FALSE(AllFinite(cut.chunks)) << "seed " << seed << " count " << count << " at " << at;
    }
  }
}

}  // namespace
}  // namespace cohort
