#include "trainer/data/sampler.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(SamplerTest, PermutationIsAPermutationFixedBySeedAndEpoch) {
  auto p = EpochPermutation(1, 0, 1000);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, EpochPermutation(1, 0, 1000));
  EXPECT_NE(p, EpochPermutation(1, 1, 1000));
  EXPECT_NE(p, EpochPermutation(2, 0, 1000));
}

TEST(SamplerTest, RanksAreDisjointAndCoverTheEpoch) {
  const int64_t n = 1003, b = 16;
  const int w = 3;
  for (int64_t epoch : {0, 1, 5}) {
    std::vector<Sampler> ranks;
    for (int r = 0; r < w; ++r) {
      ranks.emplace_back(n, 42, r, w, b);
      ranks.back().SetEpoch(epoch);
    }
    const int64_t steps = ranks[0].steps_per_epoch();
    EXPECT_EQ(steps, n / (w * b));
    std::set<int64_t> seen;
    for (int64_t s = 0; s < steps; ++s)
      for (int r = 0; r < w; ++r)
        for (int64_t i : ranks[r].Batch(s)) EXPECT_TRUE(seen.insert(i).second) << "sample " << i;
    // Covering: exactly the first steps·W·b entries of the epoch's permutation.
    const auto perm = EpochPermutation(42, epoch, n);
    EXPECT_EQ(seen, std::set<int64_t>(perm.begin(), perm.begin() + steps * w * b));
  }
}

TEST(SamplerTest, EqualsOneProcessWithTheGlobalBatch) {
  const int64_t n = 500, b = 8;
  const int w = 4;
  Sampler single(n, 7, 0, 1, w * b);
  std::vector<Sampler> ranks;
  for (int r = 0; r < w; ++r) ranks.emplace_back(n, 7, r, w, b);
  for (int64_t epoch : {0, 3}) {
    single.SetEpoch(epoch);
    for (auto& s : ranks) s.SetEpoch(epoch);
    ASSERT_EQ(single.steps_per_epoch(), ranks[0].steps_per_epoch());
    for (int64_t s = 0; s < single.steps_per_epoch(); ++s) {
      std::vector<int64_t> joined;
      for (int r = 0; r < w; ++r) {
        auto part = ranks[r].Batch(s);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      auto whole = single.Batch(s);
      EXPECT_EQ(joined, std::vector<int64_t>(whole.begin(), whole.end())) << "step " << s;
    }
  }
}

TEST(SamplerTest, SameOrderOnEveryRankAndRemainderDiffersPerEpoch) {
  // Every rank derives the same permutation, so rank r's slice is fixed by (seed, epoch) alone.
  Sampler a(100, 3, 1, 2, 10), b(100, 3, 1, 2, 10);
  a.SetEpoch(2);
  b.SetEpoch(2);
  for (int64_t s = 0; s < a.steps_per_epoch(); ++s) {
    auto x = a.Batch(s), y = b.Batch(s);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin()));
  }
  // n = 105, W·b = 20: 5 samples dropped, a different set each epoch.
  auto dropped = [](int64_t epoch) {
    auto p = EpochPermutation(3, epoch, 105);
    return std::set<int64_t>(p.begin() + 100, p.end());
  };
  EXPECT_NE(dropped(0), dropped(1));
}

}  // namespace
}  // namespace cohort
