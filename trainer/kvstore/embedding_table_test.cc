#include "trainer/kvstore/embedding_table.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr int64_t kDim = 4;

TableSpec Fixed(int64_t rows) {
  TableSpec spec;
  spec.name = "C1";
  spec.dim = kDim;
  spec.rows = rows;
  spec.seed = 42;
  return spec;
}

TableSpec Collisionless(int64_t limit, int admit_after) {
  TableSpec spec = Fixed(limit);
  spec.name = "C2";
  spec.kind = TableSpec::Kind::kCollisionless;
  spec.admit_after = admit_after;
  return spec;
}

std::vector<float> Pulled(const EmbeddingTable& table, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * kDim);
  EXPECT_TRUE(table.Pull(ids, absl::MakeSpan(out)).ok());
  return out;
}

// Every row held, its key and values and state, as one list of floats and keys.
std::vector<float> Held(const EmbeddingTable& table) {
  std::vector<float> all;
  table.ForEachRow([&](uint64_t key, absl::Span<const float> v, absl::Span<const float> s) {
    all.push_back(static_cast<float>(key));
    all.insert(all.end(), v.begin(), v.end());
    all.insert(all.end(), s.begin(), s.end());
  });
  return all;
}

TEST(EmbeddingTableTest, RowsStartFromTheSeedAndTheirKeyWhateverTheOrderOfFirstTouches) {
  RowSgd sgd;
  EmbeddingTable a(Fixed(100), &sgd), b(Fixed(100), &sgd);
  const std::vector<float> before = Pulled(a, {5, 105, 6});
  EXPECT_EQ(std::vector<float>(before.begin(), before.begin() + kDim),
            std::vector<float>(before.begin() + kDim, before.begin() + 2 * kDim));  // 105 % 100
  EXPECT_NE(before[0], before[2 * kDim]);
  for (float x : before) EXPECT_LT(std::abs(x), 0.01f);
  EXPECT_EQ(a.rows_held(), 0);  // a pull creates nothing
  const std::vector<float> zero(2 * kDim, 0.0f);
  ASSERT_TRUE(a.Apply(std::vector<uint64_t>{5, 9}, zero, 0.1f).ok());
  ASSERT_TRUE(b.Apply(std::vector<uint64_t>{9}, std::vector<float>(kDim), 0.1f).ok());
  ASSERT_TRUE(b.Apply(std::vector<uint64_t>{5}, std::vector<float>(kDim), 0.1f).ok());
  EXPECT_EQ(Held(a), Held(b));
  EXPECT_EQ(Pulled(a, {5}), std::vector<float>(before.begin(), before.begin() + kDim));
  TableSpec other_seed = Fixed(100);
  other_seed.seed = 43;
  EmbeddingTable c(other_seed, &sgd);
  EXPECT_NE(Pulled(c, {5}), Pulled(a, {5}));
  TableSpec other_table = Fixed(100);
  other_table.name = "C9";
  EmbeddingTable d(other_table, &sgd);
  EXPECT_NE(Pulled(d, {5}), Pulled(a, {5}));
}

TEST(EmbeddingTableTest, SparseStepsGiveTheBytesOfTheWholeTableUpdatedDensely) {
  constexpr int64_t kRows = 50;
  RowAdagrad adagrad({});
  EmbeddingTable table(Fixed(kRows), &adagrad);
  // The dense reference: every row, its state, updated every step (a zero gradient for the
  // rows no id of the step falls on).
  std::vector<uint64_t> all(kRows);
  for (int64_t r = 0; r < kRows; ++r) all[r] = r;
  std::vector<float> dense = Pulled(table, all), state(kRows * kDim);
  adagrad.InitState(absl::MakeSpan(state));
  std::mt19937_64 random(9);
  std::normal_distribution<float> normal;
  for (int step = 0; step < 30; ++step) {
    // Ids beyond the rows (taken modulo), some falling on one row twice in a step.
    std::vector<uint64_t> ids;
    for (int k = 0; k < 8; ++k) ids.push_back(random() % 400);
    std::vector<float> grads(ids.size() * kDim);
    for (float& g : grads) g = normal(random);
    ASSERT_TRUE(table.Apply(ids, grads, 0.05f).ok());
    std::vector<float> row_grads(kRows * kDim, 0.0f);
    for (size_t k = 0; k < ids.size(); ++k) {
      for (int64_t i = 0; i < kDim; ++i)
        row_grads[(ids[k] % kRows) * kDim + i] += grads[k * kDim + i];
    }
    for (int64_t r = 0; r < kRows; ++r) {
      adagrad.ApplyRow(absl::MakeSpan(dense).subspan(r * kDim, kDim),
                       absl::MakeConstSpan(row_grads).subspan(r * kDim, kDim),
                       absl::MakeSpan(state).subspan(r * kDim, kDim), 0.05f, step + 1);
    }
  }
  const std::vector<float> sparse = Pulled(table, all);
  ASSERT_EQ(sparse.size(), dense.size());
  EXPECT_EQ(std::memcmp(sparse.data(), dense.data(), dense.size() * sizeof(float)), 0);
  EXPECT_EQ(table.steps(), 30);
  EXPECT_LE(table.rows_held(), kRows);
}

TEST(EmbeddingTableTest, ARowIsAdmittedAtItsNthStepAndReadsZerosBefore) {
  RowSgd sgd;
  EmbeddingTable table(Collisionless(0, 3), &sgd);
  const std::vector<float> ones(kDim, 1.0f);
  const uint64_t id = 0xfeedfacecafebeefull;
  for (int step = 1; step <= 2; ++step) {
    ASSERT_TRUE(table.Apply(std::vector<uint64_t>{id}, ones, 0.5f).ok());
    EXPECT_EQ(table.rows_held(), 0) << step;
    EXPECT_EQ(Pulled(table, {id}), std::vector<float>(kDim, 0.0f));
  }
  ASSERT_TRUE(
      table.Apply(std::vector<uint64_t>{id, 7}, std::vector<float>(2 * kDim, 1.0f), 0.5f).ok());
  EXPECT_EQ(table.rows_held(), 1);  // id, at its third step; 7 seen once
  const std::vector<float> row = Pulled(table, {id});
  // Its initial values (those of a table admitting at once), less lr · g.
  EmbeddingTable at_once(Collisionless(0, 1), &sgd);
  const std::vector<float> initial = Pulled(at_once, {id});
  for (int64_t i = 0; i < kDim; ++i) EXPECT_EQ(row[i], initial[i] - 0.5f);
}

TEST(EmbeddingTableTest, AStepPastTheRowLimitIsRefusedWholeNamingTheTable) {
  RowAdagrad adagrad({});
  EmbeddingTable table(Collisionless(3, 1), &adagrad);
  ASSERT_TRUE(
      table.Apply(std::vector<uint64_t>{1, 2}, std::vector<float>(2 * kDim, 1.0f), 0.1f).ok());
  const std::vector<float> before = Held(table);
  const absl::Status refused =
      table.Apply(std::vector<uint64_t>{2, 3, 4}, std::vector<float>(3 * kDim, 1.0f), 0.1f);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "table C2 on this shard holds 2 rows, and step 2 would add 2 more past its limit of "
            "3: raise the table's row limit, spread it over more shards, or filter rare ids "
            "(admit_after)");
  EXPECT_EQ(Held(table), before);
  EXPECT_EQ(table.steps(), 1);
  EXPECT_TRUE(table.Apply(std::vector<uint64_t>{2, 3}, std::vector<float>(2 * kDim), 0.1f).ok());
  EXPECT_EQ(table.rows_held(), 3);
}

TEST(EmbeddingTableTest, HoldsRowsAndStateInBlocksAndListsThemByKey) {
  RowAdam adam({});
  EmbeddingTable table(Collisionless(0, 1), &adam);
  EXPECT_EQ(table.bytes_held(), 0);
  ASSERT_TRUE(
      table.Apply(std::vector<uint64_t>{30, 10, 20}, std::vector<float>(3 * kDim, 1.0f), 0.1f)
          .ok());
  std::vector<uint64_t> keys;
  table.ForEachRow([&](uint64_t key, absl::Span<const float> v, absl::Span<const float> s) {
    keys.push_back(key);
    EXPECT_EQ(v.size(), static_cast<size_t>(kDim));
    EXPECT_EQ(s.size(), static_cast<size_t>(2 * kDim));  // m and v
    EXPECT_NE(s[0], 0.0f);
  });
  EXPECT_EQ(keys, (std::vector<uint64_t>{10, 20, 30}));
  // One block: 16,384 rows of 4 values and 8 state floats.
  EXPECT_EQ(table.bytes_held(), 16384 * 12 * 4);
  EXPECT_EQ(table.Pull(std::vector<uint64_t>{1}, absl::Span<float>()).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

TEST(EmbeddingTableTest, ARestoredSnapshotGoesOnBitwiseAsTheTableItWasTakenFrom) {
  RowAdam adam({});
  TableSpec spec = Collisionless(0, 2);
  EmbeddingTable table(spec, &adam);
  const auto step = [&](EmbeddingTable& t, uint64_t seed) {
    std::mt19937_64 r(seed);
    std::vector<uint64_t> ids;
    for (int k = 0; k < 6; ++k) ids.push_back(r() % 12);
    std::vector<float> grads(ids.size() * kDim);
    for (float& g : grads) g = static_cast<float>(static_cast<int64_t>(r() % 200) - 100) / 50;
    ASSERT_TRUE(t.Apply(ids, grads, 0.01f).ok());
  };
  for (uint64_t s = 0; s < 5; ++s) step(table, s);
  const TableSnapshot snapshot = table.Snapshot();
  EXPECT_EQ(snapshot.steps, 5);
  EXPECT_FALSE(snapshot.sighted.empty());  // ids seen once, not admitted yet
  EmbeddingTable restored(spec, &adam);
  ASSERT_TRUE(restored.Restore(snapshot).ok());
  for (uint64_t s = 5; s < 10; ++s) {
    step(table, s);
    step(restored, s);
  }
  EXPECT_EQ(Held(restored), Held(table));
  EXPECT_EQ(restored.steps(), 10);
  const TableSnapshot again = restored.Snapshot();
  EXPECT_EQ(again.sighted, table.Snapshot().sighted);
}

TEST(EmbeddingTableTest, ASnapshotOfAnotherShapeIsRefusedChangingNothing) {
  RowAdagrad adagrad({});
  RowAdam adam({});
  EmbeddingTable adam_table(Collisionless(0, 1), &adam);
  ASSERT_TRUE(
      adam_table.Apply(std::vector<uint64_t>{1, 2}, std::vector<float>(2 * kDim, 1.0f), 0.1f).ok());
  EmbeddingTable table(Collisionless(0, 1), &adagrad);
  ASSERT_TRUE(table.Apply(std::vector<uint64_t>{5}, std::vector<float>(kDim, 1.0f), 0.1f).ok());
  const std::vector<float> before = Held(table);
  const absl::Status refused = table.Restore(adam_table.Snapshot());  // two state floats a value
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("written for another table or rule"), std::string::npos)
      << refused;
  EXPECT_EQ(Held(table), before);
  TableSnapshot unordered = table.Snapshot();
  unordered.keys = {9, 9};
  unordered.values.resize(2 * kDim);
  unordered.state.resize(2 * kDim);
  EXPECT_FALSE(table.Restore(unordered).ok());
}

}  // namespace
}  // namespace cohort
