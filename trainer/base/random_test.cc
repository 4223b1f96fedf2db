#include "trainer/base/random.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(RandomTest, SameKeysSameStream) {
  Rng a(MixKeys({7, 3, 11}));
  Rng b(MixKeys({7, 3, 11}));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
}

TEST(RandomTest, MixBitsIsSplitMix64) {
  // splitmix64's first outputs from state 0 (Vigna's reference implementation).
  EXPECT_EQ(MixBits(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(MixBits(0x9e3779b97f4a7c15ULL), 0x6e789e6aa1b965f4ULL);
}

TEST(RandomTest, KeyOrderMatters) {
  EXPECT_NE(MixKeys({1, 2}), MixKeys({2, 1}));
  EXPECT_NE(MixKeys({0}), MixKeys({0, 0}));
  EXPECT_NE(HashName("conv1.weight"), HashName("conv1.bias"));
}

TEST(RandomTest, UniformAndBelowAreUnbiased) {
  Rng rng(42);
  const int n = 200000;
  double sum = 0;
  std::vector<int> counts(7, 0);
  for (int i = 0; i < n; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++counts[rng.Below(7)];
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  for (int c : counts) EXPECT_NEAR(c, n / 7.0, 5 * std::sqrt(n / 7.0));
}

}  // namespace
}  // namespace cohort
