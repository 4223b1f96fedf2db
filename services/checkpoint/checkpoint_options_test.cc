// A shard's checkpoint options: one check, and the command line that gives them back.

#include "services/checkpoint/checkpoint_options.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;

TEST(CheckpointOptionsTest, RefusesStepsBelowZeroKeepBelowOneAndCheckpointsWithoutAFolder) {
  EXPECT_TRUE(CheckpointOptions().Validate().ok());
  EXPECT_TRUE((CheckpointOptions{"ckpt", 10, 3, ""}).Validate().ok());
  EXPECT_TRUE((CheckpointOptions{"", 10, 3, "old"}).Validate().ok());
  for (const CheckpointOptions& bad : {CheckpointOptions{"ckpt", -1, 3, ""},
                                       CheckpointOptions{"ckpt", 10, 0, ""},
                                       CheckpointOptions{"", 10, 3, ""}}) {
    const absl::Status s = bad.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "--checkpoint_every")) << s;
  }
}

TEST(CheckpointOptionsTest, WritesWhatDiffersFromTheDefaults) {
  EXPECT_TRUE(CheckpointOptions().ToArgs().empty());
  EXPECT_THAT((CheckpointOptions{"ckpt", 10, 2, "old"}).ToArgs(),
              ElementsAre("--checkpoint_dir=ckpt", "--resume=old", "--checkpoint_every=10",
                          "--checkpoint_keep=2"));
}

// A shard restarted in a job that itself resumed from another folder: one --resume, where the
// job checkpoints now.
TEST(CheckpointOptionsTest, ARestartedShardResumesOnceFromWhereTheJobCheckpoints) {
  EXPECT_THAT((CheckpointOptions{"ckpt", 10, 3, "old"}).ToArgsForRestart(),
              ElementsAre("--checkpoint_dir=ckpt", "--resume=ckpt", "--checkpoint_every=10",
                          "--checkpoint_keep=3"));
  EXPECT_THAT((CheckpointOptions{"", 10, 3, "old"}).ToArgsForRestart(),
              ElementsAre("--checkpoint_dir=old", "--resume=old", "--checkpoint_every=10",
                          "--checkpoint_keep=3"));
}

}  // namespace
}  // namespace cohort
