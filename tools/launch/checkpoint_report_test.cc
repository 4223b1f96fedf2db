#include "tools/launch/checkpoint_report.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "services/checkpoint/checkpoint_files.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "services/common/test_tmp_dir.h"

namespace cohort::launch {
namespace {

TEST(CheckpointReportTest, NamesTheNewestCompleteCheckpointAndItsAge) {
  const std::string root = TmpDir() + "/report";
  std::filesystem::remove_all(root);
  EXPECT_EQ(NewestCheckpointReport(root, 2, absl::Now()),
            "no complete checkpoint in " + root + ": a resume would start over");
  for (int64_t step : {40, 80}) {
    for (int shard = 0; shard < 2; ++shard) {
      ShardCheckpoint c;
      c.step = step;
      c.shard_rank = shard;
      c.num_shards = 2;
      // Step 80: shard 1's write failed (a full disk).
      if (step == 80 && shard == 1) continue;
      ASSERT_TRUE(WriteShardCheckpoint(root, c).ok());
    }
  }
  const absl::Time end = absl::Now() + absl::Seconds(35);
  EXPECT_EQ(NewestCheckpointReport(root, 2, end),
            "newest complete checkpoint: step 40 (" + CheckpointFolder(root, 40) +
                "), written 35s before the end");
}

}  // namespace
}  // namespace cohort::launch
