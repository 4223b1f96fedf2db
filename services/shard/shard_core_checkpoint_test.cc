#include "services/shard/shard_core.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/shard/shard_core_testing.h"

namespace cohort {
namespace {

// W = 2 workers push `steps` steps of both parts, from step `first` on.
void Train(ShardCore* core, int first, int steps, std::vector<RecordingSink>* sinks) {
  for (int step = first; step < first + steps; ++step) {
    for (int r = 0; r < 2; ++r) {
      for (int part = 0; part < 2; ++part) {
        ASSERT_TRUE(core->Push(r, {4, part}, step, Gradient(r + part, step, 3), &(*sinks)[r]).ok());
      }
    }
  }
}

// A shard resumed from the checkpoint at step 2 (values, versions, momentum) continues bitwise as
// the shard that wrote it; a job with another partition map is refused.
TEST(ShardCoreCheckpointTest, ResumedShardContinuesBitwise) {
  for (KVStoreMode mode : {KVStoreMode::kDistSync, KVStoreMode::kDistAsync}) {
    SCOPED_TRACE(std::string(KVStoreModeName(mode)));
    ShardConfig config = Config(2, mode, /*parts=*/2);
    config.partition_fingerprint = 77;
    MemoryCheckpoints checkpoints;
    ShardCore original;
    original.set_checkpoints(2, &checkpoints);
    ASSERT_TRUE(original.Configure(config).ok());
    ASSERT_TRUE(original.AddPart({4, 0}, std::vector<float>{1, 2, 3}).ok());
    ASSERT_TRUE(original.AddPart({4, 1}, std::vector<float>{-1, 0.5f, 9}).ok());
    std::vector<RecordingSink> sinks(2);
    Train(&original, 0, 4, &sinks);
    // Steps 0 (the initial values), 2 and 4, each with both parts at the step's version
    // (dist_async: 2 pushes a step).
    ASSERT_EQ(checkpoints.steps.size(), 3u);
    EXPECT_EQ(checkpoints.steps.at(0).parts.size(), 2u);
    const ShardCheckpoint& at2 = checkpoints.steps.at(2);
    ASSERT_EQ(at2.parts.size(), 2u);
    const int64_t per_step = mode == KVStoreMode::kDistAsync ? 2 : 1;
    for (const PartCheckpoint& p : at2.parts) {
      EXPECT_EQ(p.version, 2 * per_step);
      EXPECT_EQ(p.optimizer.tensors.count("velocity"), 1u);
    }

    ShardCore resumed;
    resumed.ResumeFrom(at2);
    ASSERT_TRUE(resumed.Configure(config).ok());
    // The initial values rank 0 sends are replaced by the checkpoint's.
    ASSERT_TRUE(resumed.AddPart({4, 0}, std::vector<float>{0, 0, 0}).ok());
    ASSERT_TRUE(resumed.AddPart({4, 1}, std::vector<float>{0, 0, 0}).ok());
    std::vector<float> value;
    EXPECT_EQ(*resumed.Read({4, 0}, &value), 2 * per_step);
    EXPECT_EQ(value, at2.parts[0].id.part == 0 ? at2.parts[0].value : at2.parts[1].value);
    std::vector<RecordingSink> resumed_sinks(2);
    Train(&resumed, 2, 2, &resumed_sinks);
    for (int part = 0; part < 2; ++part) {
      std::vector<float> want, got;
      EXPECT_EQ(*original.Read({4, part}, &want), *resumed.Read({4, part}, &got));
      EXPECT_EQ(want, got) << "part " << part;
    }

    ShardConfig other = config;
    other.partition_fingerprint = 78;
    ShardCore refused;
    refused.ResumeFrom(at2);
    const absl::Status s = refused.Configure(other);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("--part_bytes"), absl::string_view::npos) << s;

    // Another number of workers, or of steps an epoch (another batch): its steps mean another
    // point of the data.
    ShardCheckpoint written = at2;  // as the checkpointer records it
    const int64_t per_epoch = config.optimizer.lr_schedule.steps_per_epoch;
    written.steps_per_epoch = per_epoch;
    for (const auto& [workers, steps_per_epoch] :
         {std::pair{3, per_epoch}, std::pair{2, per_epoch * 2}}) {
      ShardConfig split = config;
      split.num_workers = workers;
      split.optimizer.lr_schedule.steps_per_epoch = steps_per_epoch;
      ShardCore other_split;
      other_split.ResumeFrom(written);
      const absl::Status refused_split = other_split.Configure(split);
      EXPECT_EQ(refused_split.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_TRUE(absl::StrContains(
          refused_split.message(),
          absl::StrCat("was written by a job of 2 workers at ", per_epoch,
                       " steps an epoch; this job has ", workers, " workers at ", steps_per_epoch,
                       " steps an epoch")))
          << refused_split;
    }
  }
}

// A shard rolled back to a checkpoint (another shard died) drops the half-pushed version and
// goes on from the checkpoint exactly as the uninterrupted shard did from there.
TEST(ShardCoreCheckpointTest, RolledBackShardRepeatsTheStepsAfterTheCheckpointBitwise) {
  ShardConfig config = Config(2, KVStoreMode::kDistSync, /*parts=*/2);
  MemoryCheckpoints checkpoints;
  ShardCore core;
  core.set_checkpoints(2, &checkpoints);
  ASSERT_TRUE(core.Configure(config).ok());
  ASSERT_TRUE(core.AddPart({4, 0}, std::vector<float>{1, 2, 3}).ok());
  ASSERT_TRUE(core.AddPart({4, 1}, std::vector<float>{-1, 0.5f, 9}).ok());
  std::vector<RecordingSink> sinks(2);
  Train(&core, 0, 4, &sinks);
  std::vector<float> at4[2];
  for (int part = 0; part < 2; ++part) ASSERT_EQ(*core.Read({4, part}, &at4[part]), 4);
  // Step 4 half pushed (rank 0 only), then a shard dies: back to step 2.
  ASSERT_TRUE(core.Push(0, {4, 0}, 4, Gradient(0, 4, 3), &sinks[0]).ok());
  ShardCheckpoint at2 = checkpoints.steps.at(2);
  ASSERT_TRUE(core.RollBack(at2).ok());
  EXPECT_EQ(core.start_step(), 2);
  EXPECT_EQ(checkpoints.steps.count(4), 0u);  // forgotten: it is written again
  std::vector<float> value;
  for (const PartCheckpoint& saved : at2.parts) {
    EXPECT_EQ(*core.Read(saved.id, &value), 2);
    EXPECT_EQ(value, saved.value);
  }
  Train(&core, 2, 2, &sinks);
  for (int part = 0; part < 2; ++part) {
    EXPECT_EQ(*core.Read({4, part}, &value), 4);
    EXPECT_EQ(value, at4[part]) << "part " << part;
  }
  EXPECT_EQ(checkpoints.steps.at(4).parts.size(), 2u);

  at2.partition_fingerprint += 1;
  EXPECT_EQ(core.RollBack(at2).code(), absl::StatusCode::kFailedPrecondition);
}

// An elastic job's workers changed (2 → 3): the shard goes back to the checkpoint at step 2,
// renumbered as step 5 for 3 workers, with their update rule. Its first update under the new
// generation is bitwise the one a shard resumed from that checkpoint under the new config
// makes; the old generation's pushes are refused and counted; the new generation's first step
// is handed to the checkpoint sink at once, and the undone steps are forgotten.
TEST(ShardCoreCheckpointTest, RegenerationGoesOnFromTheCheckpointUnderTheNewMembership) {
  for (KVStoreMode mode : {KVStoreMode::kDistSync, KVStoreMode::kDistAsync}) {
    SCOPED_TRACE(std::string(KVStoreModeName(mode)));
    ProcessMetrics process("job-e", "shard", 0);
    ShardMetrics metrics(process);
    const ShardConfig config = Config(2, mode, /*parts=*/2);
    MemoryCheckpoints checkpoints;
    ShardCore core;
    core.set_metrics(&metrics);
    core.set_checkpoints(2, &checkpoints);
    ASSERT_TRUE(core.Configure(config).ok());
    ASSERT_TRUE(core.AddPart({4, 0}, std::vector<float>{1, 2, 3}).ok());
    ASSERT_TRUE(core.AddPart({4, 1}, std::vector<float>{-1, 0.5f, 9}).ok());
    std::vector<RecordingSink> sinks(3);
    Train(&core, 0, 3, &sinks);
    ShardCheckpoint at2 = checkpoints.steps.at(2);

    ShardConfig next = Config(3, mode, /*parts=*/2);
    next.generation = 1;
    next.optimizer.lr_schedule.base_lr = 0.75;
    next.optimizer.lr_schedule.steps_per_epoch = 3;
    ASSERT_TRUE(core.RollBack(at2, Regeneration{next, 5}).ok());
    EXPECT_EQ(core.config()->generation, 1);
    EXPECT_EQ(core.start_step(), 5);
    EXPECT_EQ(checkpoints.steps.count(3), 0u);
    const int64_t per_step = mode == KVStoreMode::kDistAsync ? 3 : 1;
    std::vector<float> value;
    EXPECT_EQ(*core.Read({4, 0}, &value), 5 * per_step);

    core.CheckpointNow();
    ASSERT_EQ(checkpoints.steps.count(5), 1u);
    EXPECT_EQ(checkpoints.steps.at(5).parts.size(), 2u);
    EXPECT_EQ(checkpoints.configured.num_workers, 3);

    // A push made before the change: refused whatever its rank, version or values.
    const absl::Status stale = core.Push(0, {4, 0}, 5 * per_step, Gradient(0, 5, 3), &sinks[0]);
    EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(stale.message(), "generation 0")) << stale;
    EXPECT_EQ(metrics.rejected[static_cast<int>(Rejection::kStaleGeneration)]->Value(), 1);

    // The reference: a shard resumed from the same checkpoint under the new config.
    ShardCheckpoint renumbered = at2;
    renumbered.step = 5;
    renumbered.num_workers = 3;  // as the new generation writes it
    renumbered.steps_per_epoch = 3;
    for (PartCheckpoint& p : renumbered.parts) p.version = 5 * per_step;
    ShardCore reference;
    reference.ResumeFrom(renumbered);
    ASSERT_TRUE(reference.Configure(next).ok());
    ASSERT_TRUE(reference.AddPart({4, 0}, std::vector<float>(3)).ok());
    ASSERT_TRUE(reference.AddPart({4, 1}, std::vector<float>(3)).ok());
    for (ShardCore* c : {&core, &reference}) {
      for (int r = 0; r < 3; ++r) {
        for (int part = 0; part < 2; ++part) {
          ASSERT_TRUE(
              c->Push(r, {4, part}, 5 * per_step, Gradient(r + part, 5, 3), &sinks[r], 1).ok());
        }
      }
    }
    for (int part = 0; part < 2; ++part) {
      std::vector<float> want, got;
      EXPECT_EQ(*reference.Read({4, part}, &want), *core.Read({4, part}, &got));
      EXPECT_EQ(want, got) << "part " << part;
    }

    // Only the number of workers and the rate may change.
    ShardConfig other = next;
    other.generation = 2;
    other.partition_fingerprint += 1;
    EXPECT_EQ(core.RollBack(at2, Regeneration{other, 5}).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(core.config()->generation, 1);
  }
}

}  // namespace
}  // namespace cohort
