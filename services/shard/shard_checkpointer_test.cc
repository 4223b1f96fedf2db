// Two shards write their checkpoints on their writer threads into one folder; the newest
// complete one holds both shards' parts at its step, older ones are pruned, and a shard
// resumed from it continues as the original. A write that fails is said and training goes on.

#include "services/shard/shard_checkpointer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/checkpoint/checkpoint_files.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

class NullSink final : public PartSink {
 public:
  void Send(PartId, int64_t, absl::Span<const float>, PinCount*) override {}
};

ShardConfig Config() {
  ShardConfig c;
  c.num_workers = 2;
  c.mode = KVStoreMode::kDistSync;
  c.num_parts = 2;
  c.partition_fingerprint = 5;
  c.optimizer.optimizer = "adam";
  c.optimizer.lr_schedule.base_lr = 0.01;
  c.optimizer.lr_schedule.steps_per_epoch = 100;
  return c;
}

std::vector<float> Grad(int rank, int64_t step, int part) {
  return {0.1f * rank + 0.01f * static_cast<float>(step), -0.2f * part, 0.3f};
}

// Shard `shard` holds keys 2·shard and 2·shard+1 (one part each).
void AddParts(ShardCore* core, int shard) {
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(core->AddPart({2 * shard + k, 0}, std::vector<float>{1.0f * k, 2, 3}).ok());
  }
}

void Steps(ShardCore* core, int shard, int64_t from, int64_t to) {
  NullSink sink;
  for (int64_t step = from; step < to; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      for (int k = 0; k < 2; ++k) {
        const absl::Status s = core->Push(rank, {2 * shard + k, 0}, step, Grad(rank, step, k), &sink);
        ASSERT_TRUE(s.ok()) << s;
      }
    }
  }
}

TEST(ShardCheckpointerTest, ShardsWriteCompleteCheckpointsAndResumeFromThem) {
  const std::string root = absl::StrCat(TmpDir(), "/checkpointer");
  std::filesystem::remove_all(root);
  std::vector<std::unique_ptr<ShardCore>> cores;
  std::ostringstream log;
  {
    std::vector<std::unique_ptr<ShardCheckpointer>> writers;
    for (int shard = 0; shard < 2; ++shard) {
      writers.push_back(std::make_unique<ShardCheckpointer>(
          ShardCheckpointerOptions{root, /*keep=*/2, shard, /*num_shards=*/2}, nullptr, &log));
      cores.push_back(std::make_unique<ShardCore>(shard));
      cores[shard]->set_checkpoints(3, writers[shard].get());
      ASSERT_TRUE(cores[shard]->Configure(Config()).ok());
      AddParts(cores[shard].get(), shard);
    }
    for (int64_t step = 0; step < 10; ++step) {
      for (int shard = 0; shard < 2; ++shard) Steps(cores[shard].get(), shard, step, step + 1);
      for (auto& w : writers) w->Flush();
    }
  }  // the writers finish what is queued
  auto latest = FindLatestCheckpoint(root, ShardCheckpointManifests(2));
  ASSERT_TRUE(latest.ok()) << latest.status() << "\n" << log.str();
  EXPECT_EQ(latest->version, 9);
  EXPECT_EQ(CheckpointVersions(root), (std::vector<int64_t>{9, 6})) << log.str();
  EXPECT_TRUE(absl::StrContains(log.str(), "shard 1: checkpoint at step 9 written to")) << log.str();

  // Shards resumed at step 9 take step 9 as the originals did.
  for (int shard = 0; shard < 2; ++shard) {
    auto point = LoadLatestShardCheckpoint(root, {shard}, 2);
    ASSERT_TRUE(point.ok()) << point.status();
    ShardCore resumed(shard);
    resumed.ResumeFrom(point->checkpoint);
    ASSERT_TRUE(resumed.Configure(Config()).ok());
    AddParts(&resumed, shard);
    Steps(&resumed, shard, 9, 10);
    for (int k = 0; k < 2; ++k) {
      std::vector<float> want, got;
      EXPECT_EQ(*cores[shard]->Read({2 * shard + k, 0}, &want), 10);
      EXPECT_EQ(*resumed.Read({2 * shard + k, 0}, &got), 10);
      EXPECT_EQ(want, got) << "shard " << shard << " key " << 2 * shard + k;
    }
  }
}

TEST(ShardCheckpointerTest, AFailedWriteIsSaidAndTrainingGoesOn) {
  const std::string blocker = absl::StrCat(TmpDir(), "/not-a-folder");
  std::ofstream(blocker) << "a file where the checkpoint folder should be";
  std::ostringstream log;
  ShardCore core(0);
  {
    ShardCheckpointer writer({blocker + "/ckpt", 2, 0, 1}, nullptr, &log);
    core.set_checkpoints(1, &writer);
    ASSERT_TRUE(core.Configure(Config()).ok());
    AddParts(&core, 0);
    for (int64_t step = 0; step < 2; ++step) {
      Steps(&core, 0, step, step + 1);
      writer.Flush();
    }
  }
  std::vector<float> value;
  EXPECT_EQ(*core.Read({0, 0}, &value), 2);
  for (const char* step : {"1", "2"}) {
    EXPECT_TRUE(absl::StrContains(log.str(), absl::StrCat("shard 0: error: checkpoint at step ",
                                                          step, " not written to ", blocker,
                                                          "/ckpt/v00000000000", step)))
        << log.str();
  }
}

// Shard 0 of 2 leads its own share (keys 0, 1) and, after shard 1 died, share 1 (keys 2, 3),
// whose key 2 it led only from after step 3: each share is written to its own file once every
// one of its parts is in (step 3 of share 1 never is, and does not hold step 6 back), and a
// shard resumed on both shares reads both files as one checkpoint.
TEST(ShardCheckpointerTest, EachShareLedIsWrittenToItsOwnFileOnceWhole) {
  const std::string root = absl::StrCat(TmpDir(), "/shares");
  std::filesystem::remove_all(root);
  const auto part = [](int key, int64_t step) {
    return PartCheckpoint{{key, 0}, step, {1.0f * key, 0.5f * step}, {}};
  };
  std::ostringstream log;
  {
    ShardCheckpointer writer({root, /*keep=*/5, /*shard_rank=*/0, /*num_shards=*/2}, nullptr,
                             &log);
    writer.Configured(Config());
    for (int share : {0, 0, 1, 1}) writer.Holds(share);
    for (int64_t step : {3, 6}) {
      for (int key : {0, 1}) writer.Add(step, 0, part(key, step));
      if (step == 6) writer.Add(step, 1, part(2, step));
      writer.Add(step, 1, part(3, step));
      writer.Flush();
    }
  }
  EXPECT_EQ(CheckpointVersions(root), (std::vector<int64_t>{6, 3})) << log.str();
  ASSERT_TRUE(VerifyManifest(root, 3, ShardCheckpointManifest(0)).ok());
  EXPECT_EQ(VerifyManifest(root, 3, ShardCheckpointManifest(1)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(log.str(), "shard 0: checkpoint at step 6 written to "))
      << log.str();
  EXPECT_TRUE(absl::StrContains(log.str(), "shard 0: checkpoint of share 1 at step 6 written to "))
      << log.str();
  auto latest = FindLatestCheckpoint(root, ShardCheckpointManifests(2));
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version, 6);

  auto both = LoadLatestShardCheckpoint(root, {1, 0}, 2);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->checkpoint.shard_rank, 1);
  std::vector<int64_t> keys;
  for (const PartCheckpoint& p : both->checkpoint.parts) {
    keys.push_back(p.id.key);
    EXPECT_EQ(p.value, part(p.id.key, 6).value);
  }
  EXPECT_EQ(keys, (std::vector<int64_t>{2, 3, 0, 1}));
}

}  // namespace
}  // namespace cohort
