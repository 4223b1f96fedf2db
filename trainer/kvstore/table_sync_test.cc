#include "trainer/kvstore/table_sync.h"

#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr int64_t kDim = 2;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "C4";
  spec.dim = kDim;
  spec.rows = 64;
  spec.seed = 8;
  return spec;
}

std::vector<float> Rows(const EmbeddingTable& table, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * kDim);
  EXPECT_TRUE(table.Pull(ids, absl::MakeSpan(out)).ok());
  return out;
}

TEST(TableSyncTest, AStepSumsTheWorkersRowsInRankOrderWhateverOrderTheyCameIn) {
  RowAdagrad adagrad({});
  const std::vector<uint64_t> ids0 = {1, 5, 9}, ids1 = {9, 3, 1, 70};  // 70 is row 6
  const std::vector<float> g0 = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  const std::vector<float> g1 = {1e-3f, 7.0f, 0.25f, -0.5f, 3.0f, 1e8f, -2.0f, 2.0f};
  std::vector<std::vector<float>> ends;
  for (bool rank0_first : {true, false}) {
    EmbeddingTable table(Spec(), &adagrad);
    TableSync sync(&table, 2);
    for (int step = 1; step <= 3; ++step) {
      const auto push = [&](int rank) {
        return rank == 0 ? sync.Push(0, step, ids0, g0, 0.1f) : sync.Push(1, step, ids1, g1, 0.1f);
      };
      absl::StatusOr<bool> first = push(rank0_first ? 0 : 1);
      ASSERT_TRUE(first.ok()) << first.status();
      EXPECT_FALSE(*first);
      EXPECT_EQ(table.steps(), step - 1);
      absl::StatusOr<bool> last = push(rank0_first ? 1 : 0);
      ASSERT_TRUE(last.ok()) << last.status();
      EXPECT_TRUE(*last);
      EXPECT_EQ(table.steps(), step);
    }
    ends.push_back(Rows(table, {1, 3, 5, 6, 9}));
  }
  EXPECT_EQ(ends[0], ends[1]);
  // The same three steps made by hand: (g0 + g1) / 2 by row, rank 0's first.
  EmbeddingTable by_hand(Spec(), &adagrad);
  const std::vector<uint64_t> rows = {1, 5, 9, 3, 70};
  std::vector<float> sums = {
      (0.1f + 3.0f) * 0.5f, (0.2f + 1e8f) * 0.5f, 0.3f * 0.5f,  0.4f * 0.5f,  (0.5f + 1e-3f) * 0.5f,
      (0.6f + 7.0f) * 0.5f, 0.25f * 0.5f,         -0.5f * 0.5f, -2.0f * 0.5f, 2.0f * 0.5f};
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(by_hand.Apply(rows, sums, 0.1f).ok());
  EXPECT_EQ(ends[0], Rows(by_hand, {1, 3, 5, 6, 9}));
}

TEST(TableSyncTest, RefusesAPushOfAnotherStepATwiceAndAStrangerChangingNothing) {
  RowSgd sgd;
  EmbeddingTable table(Spec(), &sgd);
  TableSync sync(&table, 2);
  const std::vector<uint64_t> ids = {4};
  const std::vector<float> g = {1, 1};
  EXPECT_EQ(sync.Push(0, 2, ids, g, 0.1f).status().message(),
            "table C4: worker 0's rows for step 2 came while the table is at step 1: every "
            "worker pushes every table's rows once a step, in order");
  ASSERT_TRUE(sync.Push(0, 1, ids, g, 0.1f).ok());
  EXPECT_EQ(sync.Push(0, 1, ids, g, 0.1f).status().message(),
            "table C4: worker 0's rows for step 1 came twice");
  EXPECT_EQ(sync.Push(2, 1, ids, g, 0.1f).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sync.Push(1, 1, ids, std::vector<float>{1}, 0.1f).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.steps(), 0);
  absl::StatusOr<bool> done = sync.Push(1, 1, ids, g, 0.1f);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);
  EXPECT_EQ(table.steps(), 1);
}

TEST(TableSyncTest, RowsAreSummedInRankOrderEachOnceAndScaled) {
  // Rank 1 gives id 7 twice; rank 0 never.
  const std::vector<RankRows> by_rank = {
      {{4, 2}, {1e8f, 1, 2, 2}}, {{7, 4, 7}, {1, 1, -1e8f, 3, 2, 2}}, {{2}, {0.5f, 0.5f}}};
  const RankRows sum = SumRowsByRank(by_rank, 2);
  EXPECT_EQ(sum.ids, (std::vector<uint64_t>{4, 2, 7}));
  const float third = 1.0f / 3;
  EXPECT_EQ(sum.grads, (std::vector<float>{(1e8f + -1e8f) * third, (1.0f + 3.0f) * third,
                                           (2.0f + 0.5f) * third, (2.0f + 0.5f) * third,
                                           (1.0f + 2.0f) * third, (1.0f + 2.0f) * third}));
  const RankRows one = SumRowsByRank(std::vector<RankRows>{{{5}, {0.1f, 0.2f}}}, 2);
  EXPECT_EQ(one.grads, (std::vector<float>{0.1f, 0.2f}));  // W = 1: no scaling pass
}

TEST(TableSyncTest, AnAsyncPushIsAppliedAtOnceScaledByOneOverW) {
  RowSgd sgd;
  EmbeddingTable table(Spec(), &sgd), fresh(Spec(), &sgd);
  const std::vector<float> start = Rows(fresh, {3});
  ASSERT_TRUE(ApplyRowsAsync(&table, 4, std::vector<uint64_t>{3}, {2.0f, -4.0f}, 0.5f).ok());
  EXPECT_EQ(table.steps(), 1);
  EXPECT_EQ(Rows(table, {3}), (std::vector<float>{start[0] - 0.5f * (2.0f * 0.25f),
                                                  start[1] - 0.5f * (-4.0f * 0.25f)}));
}

}  // namespace
}  // namespace cohort
