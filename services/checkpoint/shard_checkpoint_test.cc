// A shard's checkpoint round-trips through safetensors bit for bit; the newest complete one is
// loaded past a damaged newer one, whose file is named; a damaged file is refused.

#include "services/checkpoint/shard_checkpoint.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/checkpoint/checkpoint_files.h"
#include "services/common/durable_file.h"
#include "trainer/io/whole_file.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

ShardCheckpoint Example(int64_t step, int shard) {
  ShardCheckpoint c;
  c.step = step;
  c.shard_rank = shard;
  c.num_shards = 2;
  c.mode = "dist_sync";
  c.num_workers = 2;
  c.partition_fingerprint = 0xfedcba9876543210ull;
  for (int part = 0; part < 2; ++part) {
    PartCheckpoint& p = c.parts.emplace_back();
    p.id = {3 + shard, part};
    p.version = step;
    p.value = {1.5f + part, -0.0f, 1e-30f, static_cast<float>(step)};
    p.optimizer.updates = step;
    p.optimizer.tensors["m"] = {0.25f, 0.5f, 0.75f, 1.0f};
    p.optimizer.tensors["v"] = {1e-8f, 2e-8f, 3e-8f, 4e-8f};
  }
  c.parts.push_back({{9, 0}, step, {7.0f}, {}});  // no optimizer state yet
  return c;
}

void ExpectSame(const ShardCheckpoint& a, const ShardCheckpoint& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.shard_rank, b.shard_rank);
  EXPECT_EQ(a.num_shards, b.num_shards);
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.num_workers, b.num_workers);
  EXPECT_EQ(a.partition_fingerprint, b.partition_fingerprint);
  ASSERT_EQ(a.parts.size(), b.parts.size());
  for (size_t i = 0; i < a.parts.size(); ++i) {
    EXPECT_TRUE(a.parts[i].id == b.parts[i].id) << i;
    EXPECT_EQ(a.parts[i].version, b.parts[i].version) << i;
    // Bitwise: -0.0 and denormals included.
    ASSERT_EQ(a.parts[i].value.size(), b.parts[i].value.size());
    EXPECT_EQ(0, std::memcmp(a.parts[i].value.data(), b.parts[i].value.data(),
                             a.parts[i].value.size() * sizeof(float)))
        << i;
    EXPECT_EQ(a.parts[i].optimizer.updates, b.parts[i].optimizer.updates) << i;
    EXPECT_EQ(a.parts[i].optimizer.tensors, b.parts[i].optimizer.tensors) << i;
  }
}

TEST(ShardCheckpointTest, RoundTripsBitwise) {
  const ShardCheckpoint c = Example(40, 1);
  auto back = DecodeShardCheckpoint(EncodeShardCheckpoint(c), "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(c, *back);
}

TEST(ShardCheckpointTest, RefusesAnotherSafetensorsFileNamingIt) {
  std::string bytes = EncodeShardCheckpoint(Example(1, 0));
  auto truncated = DecodeShardCheckpoint(bytes.substr(0, bytes.size() - 3), "x/shard-0.safetensors");
  ASSERT_FALSE(truncated.ok());
  EXPECT_TRUE(absl::StrContains(truncated.status().message(), "x/shard-0.safetensors"))
      << truncated.status();
  const size_t at = bytes.find("cohort-shard-checkpoint");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'k';
  auto other = DecodeShardCheckpoint(bytes, "y");
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(absl::StrContains(other.status().message(), "not a shard checkpoint"))
      << other.status();
}

TEST(ShardCheckpointTest, LoadsTheNewestCompleteOneNamingTheDamagedFile) {
  const std::string root = absl::StrCat(TmpDir(), "/shard-ckpt-load");
  std::filesystem::remove_all(root);
  EXPECT_EQ(LoadLatestShardCheckpoint(root, {0}, 2).status().code(), absl::StatusCode::kNotFound);
  for (int64_t step : {10, 20}) {
    for (int shard = 0; shard < 2; ++shard) {
      ASSERT_TRUE(WriteShardCheckpoint(root, Example(step, shard)).ok());
    }
  }
  // Step 30: only shard 0 finished (incomplete); step 20: shard 1's file has a flipped byte.
  ASSERT_TRUE(WriteShardCheckpoint(root, Example(30, 0)).ok());
  const std::string damaged = CheckpointFolder(root, 20) + "/" + ShardCheckpointFile(1);
  std::string bytes = *ReadWholeFile(damaged);
  bytes[bytes.size() - 2] ^= 0x40;
  ASSERT_TRUE(WriteFileDurably(damaged, bytes).ok());

  for (int shard = 0; shard < 2; ++shard) {
    auto point = LoadLatestShardCheckpoint(root, {shard}, 2);
    ASSERT_TRUE(point.ok()) << point.status();
    ExpectSame(point->checkpoint, Example(10, shard));
    ASSERT_EQ(point->refused.size(), 2u);
    EXPECT_TRUE(absl::StrContains(point->refused[0], ShardCheckpointManifest(1)))
        << point->refused[0];
    EXPECT_TRUE(absl::StrContains(point->refused[1], damaged)) << point->refused[1];
  }
  // A job with another number of shards is told the number the checkpoints were written by.
  const absl::Status other = LoadLatestShardCheckpoint(root, {0}, 3).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(other.message(),
                                absl::StrCat("the checkpoints in ", root,
                                             " were written by a job of 2 shards; this job has "
                                             "3: resume with -s 2")))
      << other;
  // A roll back to a given step reads this shard's file only: shard 0's of step 20 is whole.
  auto at20 = LoadShardCheckpoint(root, 20, {0}, 2);
  ASSERT_TRUE(at20.ok()) << at20.status();
  ExpectSame(*at20, Example(20, 0));
  const absl::Status refused = LoadShardCheckpoint(root, 20, {1}, 2).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(refused.message(), damaged)) << refused;
  EXPECT_EQ(LoadShardCheckpoint(root, 40, {0}, 2).status().code(), absl::StatusCode::kNotFound);

  // Resumed at step 10, shard 0 takes its files out of steps 20 and 30; shard 1's stay, and
  // the folder of step 30, which held shard 0's files only, goes.
  EXPECT_EQ(ShardCheckpointSteps(root, {1}), (std::vector<int64_t>{10, 20}));
  ASSERT_TRUE(RemoveShardFilesAfter(root, 0, 10).ok());
  EXPECT_EQ(ShardCheckpointSteps(root, {0}), (std::vector<int64_t>{10}));
  EXPECT_EQ(CheckpointVersions(root), (std::vector<int64_t>{20, 10}));
  EXPECT_FALSE(std::filesystem::exists(CheckpointFolder(root, 20) + "/" + ShardCheckpointFile(0)));
  EXPECT_TRUE(std::filesystem::exists(damaged));
  EXPECT_TRUE(VerifyManifest(root, 10, ShardCheckpointManifest(0)).ok());
}

}  // namespace
}  // namespace cohort
