#include "trainer/kvstore/table_split.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(TableSplitTest, ARowHasOneShardWhicheverOfItsIdsAsks) {
  TableSpec fixed;
  fixed.rows = 1000;
  for (uint64_t id = 0; id < 50; ++id) {
    EXPECT_EQ(ShardOfRow(fixed, id, 4), ShardOfRow(fixed, id + 1000, 4));  // the same row
  }
  TableSpec collisionless;
  collisionless.kind = TableSpec::Kind::kCollisionless;
  EXPECT_EQ(ShardOfRow(collisionless, 0xfeedull, 3), ShardOfRow(collisionless, 0xfeedull, 3));
}

TEST(TableSplitTest, HotRowsAndConsecutiveRowsSpreadEvenly) {
  // The first 4,000 rows of a fixed table (where a Zipf log's mass lies when its ids are
  // small numbers): ranges would give them all to shard 0.
  TableSpec fixed;
  fixed.rows = 1 << 20;
  std::vector<int> count(4);
  for (uint64_t row = 0; row < 4000; ++row) ++count[ShardOfRow(fixed, row, 4)];
  for (int c : count) EXPECT_NEAR(c, 1000, 100);
}

TEST(TableSplitTest, GroupsABatchByShardKeepingItsOrderAndWhereEachWent) {
  TableSpec spec;
  spec.rows = 100;
  const std::vector<uint64_t> ids = {5, 17, 105, 42, 99, 5, 63};
  const TableSplit split = SplitRows(spec, ids, 3);
  ASSERT_EQ(split.ids.size(), 3u);
  size_t total = 0;
  for (const auto& shard_ids : split.ids) total += shard_ids.size();
  EXPECT_EQ(total, ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(split.shard_of[i], ShardOfRow(spec, ids[i], 3));
    EXPECT_EQ(split.ids[split.shard_of[i]][split.position[i]], ids[i]) << i;
    if (i > 0 && split.shard_of[i] == split.shard_of[i - 1]) {
      EXPECT_EQ(split.position[i], split.position[i - 1] + 1);
    }
  }
  const TableSplit one = SplitRows(spec, ids, 1);
  EXPECT_EQ(one.ids[0], ids);
}

}  // namespace
}  // namespace cohort
