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

// Files 0..4 of 7, 5, 9, 4, 6 records: rank 0 of 2 reads files 0, 2, 4 (22 records), rank 1
// files 1, 3 (9): both run floor(9 / b) steps.
TEST(SamplerTest, ByFilesEachRankReadsOnlyItsFilesInItsOwnOrder) {
  const DataPartition partition{31, {7, 5, 9, 4, 6}};
  EXPECT_EQ(partition.FilesOf(0, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(partition.FilesOf(1, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(partition.StepsPerEpoch(2, 2), 4);
  EXPECT_EQ(partition.StepsPerEpoch(1, 2), 15);
  EXPECT_EQ(partition.StepsPerEpoch(6, 1), 0);  // a rank without a file
  // The indices of each file: [0,7) [7,12) [12,21) [21,25) [25,31).
  const std::set<int64_t> rank1_records = {7, 8, 9, 10, 11, 21, 22, 23, 24};
  for (int64_t epoch : {0, 1}) {
    Sampler rank0(partition, 5, 0, 2, 2), rank1(partition, 5, 1, 2, 2);
    rank0.SetEpoch(epoch);
    rank1.SetEpoch(epoch);
    ASSERT_EQ(rank0.steps_per_epoch(), 4);
    std::set<int64_t> seen1;
    for (int64_t step = 0; step < 4; ++step) {
      for (int64_t i : rank0.Batch(step)) EXPECT_EQ(rank1_records.count(i), 0u) << i;
      for (int64_t i : rank1.Batch(step)) {
        EXPECT_EQ(rank1_records.count(i), 1u) << i;
        EXPECT_TRUE(seen1.insert(i).second) << "twice in an epoch: " << i;
      }
    }
  }
  // The same keys, the same batches; another epoch, another order.
  Sampler a(partition, 5, 0, 2, 2), b(partition, 5, 0, 2, 2);
  const std::vector<int64_t> first(a.Batch(0).begin(), a.Batch(0).end());
  EXPECT_EQ(first, std::vector<int64_t>(b.Batch(0).begin(), b.Batch(0).end()));
  std::vector<int64_t> epoch0;
  for (int64_t step = 0; step < 4; ++step) {
    for (int64_t i : a.Batch(step)) epoch0.push_back(i);
  }
  a.SetEpoch(1);
  std::vector<int64_t> epoch1;
  for (int64_t step = 0; step < 4; ++step) {
    for (int64_t i : a.Batch(step)) epoch1.push_back(i);
  }
  EXPECT_NE(epoch0, epoch1);
}

}  // namespace
}  // namespace cohort
