// A shard's resume, roll back and regeneration on checkpoints it wrote itself: the parts take
// the checkpoint's values and versions, files of undone steps go, damage is named, and a shard
// without checkpoints refuses to roll back.

#include "services/shard/shard_rollback.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/checkpoint/checkpoint_files.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

class NullSink final : public PartSink {
 public:
  void Send(PartId, int64_t, absl::Span<const float>, PinCount*) override {}
};

// One worker, one part of 3 floats, 10 steps an epoch.
ShardConfig Config(int64_t generation = 0) {
  ShardConfig c;
  c.num_workers = 1;
  c.mode = KVStoreMode::kDistSync;
  c.num_parts = 1;
  c.partition_fingerprint = 7;
  c.optimizer.lr_schedule.base_lr = 0.1;
  c.optimizer.lr_schedule.steps_per_epoch = 10;
  c.generation = generation;
  return c;
}

constexpr PartId kPart{0, 0};

// A shard (rank 0 of 1) that checkpoints every 2 steps into its folder, with its roll back.
class ShardRollbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = absl::StrCat(TmpDir(), "/rollback");
    std::filesystem::remove_all(root_);
    Start(root_);
  }

  // A shard process started anew (checkpoint_dir: "" keeps none).
  void Start(const std::string& checkpoint_dir) {
    rollback_.reset();
    checkpointer_.reset();
    core_ = std::make_unique<ShardCore>(0);
    rollback_ = std::make_unique<ShardRollback>(core_.get(), checkpoint_dir,
                                                !checkpoint_dir.empty(), &out_, &err_);
    rollback_->SetUp(/*rank=*/0, /*num_shards=*/1, /*metrics=*/nullptr);
    if (checkpoint_dir.empty()) return;
    checkpointer_ = std::make_unique<ShardCheckpointer>(
        ShardCheckpointerOptions{checkpoint_dir, /*keep=*/10, 0, 1,
                                 [this] { rollback_->ClearUndoneSteps(); }},
        nullptr, &out_);
    core_->set_checkpoints(2, checkpointer_.get());
    rollback_->set_checkpointer(checkpointer_.get());
  }

  void Configure(int64_t generation = 0) {
    ASSERT_TRUE(core_->Configure(Config(generation)).ok());
    ASSERT_TRUE(core_->AddPart(kPart, std::vector<float>{1, 2, 3}).ok());
  }

  // Pushes of versions [from, to) from the one worker, each step's checkpoint written before
  // the next (the writer drops one that a faster step overtakes).
  void Train(int64_t from, int64_t to, int64_t generation = 0) {
    NullSink sink;
    for (int64_t v = from; v < to; ++v) {
      const std::vector<float> grad{0.5f, -1.0f, 0.25f * static_cast<float>(v)};
      const absl::Status s = core_->Push(0, kPart, v, grad, &sink, generation);
      ASSERT_TRUE(s.ok()) << s;
      if (checkpointer_ != nullptr) checkpointer_->Flush();
    }
  }

  // The part's value and version.
  std::pair<std::vector<float>, int64_t> Value() {
    std::vector<float> value;
    const int64_t version = *core_->Read(kPart, &value);
    return {value, version};
  }

  std::string root_;
  std::ostringstream out_, err_;
  std::unique_ptr<ShardCore> core_;
  std::unique_ptr<ShardCheckpointer> checkpointer_;
  std::unique_ptr<ShardRollback> rollback_;
};

TEST_F(ShardRollbackTest, RollsBackToAStepAndDropsTheUndoneStepsFiles) {
  Configure();
  Train(0, 4);
  const auto at4 = Value();
  Train(4, 7);
  ShardCheckpoints held = rollback_->Checkpoints();
  EXPECT_TRUE(held.configured);
  EXPECT_EQ(held.num_workers, 1);
  EXPECT_EQ(held.steps_per_epoch, 10);
  EXPECT_EQ(held.steps, (std::vector<int64_t>{0, 2, 4, 6})) << out_.str();

  ASSERT_TRUE(rollback_->RollBack(4, std::nullopt).ok()) << err_.str();
  EXPECT_EQ(Value(), at4);
  EXPECT_TRUE(absl::StrContains(out_.str(), absl::StrCat("shard 0: rolling back to step 4 (",
                                                         CheckpointFolder(root_, 4), ")")))
      << out_.str();
  EXPECT_EQ(rollback_->Checkpoints().steps, (std::vector<int64_t>{0, 2, 4}));
  // Training goes on from step 4 as it did the first time.
  Train(4, 7);
  EXPECT_EQ(rollback_->Checkpoints().steps, (std::vector<int64_t>{0, 2, 4, 6}));
}

// An elastic job's workers changed: the shard goes back to step 4 and goes on under generation
// 1 from step 8 (renumbered by the workers' rank 0); it writes step 8 at once, so that a later
// roll back lands on a step of the new numbering.
TEST_F(ShardRollbackTest, ARegenerationGoesOnUnderTheNewGenerationAndCheckpointsAtOnce) {
  Configure();
  Train(0, 7);
  ShardConfig next = Config(/*generation=*/1);
  next.optimizer.lr_schedule.steps_per_epoch = 20;
  ASSERT_TRUE(rollback_->RollBack(4, Regeneration{next, 8}).ok()) << err_.str();
  EXPECT_EQ(Value().second, 8);
  EXPECT_EQ(core_->config()->generation, 1);
  const ShardCheckpoints held = rollback_->Checkpoints();
  EXPECT_EQ(held.steps, (std::vector<int64_t>{0, 2, 4, 8}));
  EXPECT_EQ(held.steps_per_epoch, 20);
  Train(8, 9, /*generation=*/1);
}

TEST_F(ShardRollbackTest, AShardStartedAgainResumesFromTheNewestCompleteCheckpoint) {
  Configure();
  Train(0, 7);
  const std::vector<float> at6 = [&] {
    auto checkpoint = LoadShardCheckpoint(root_, 6, {0}, 1);
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    return checkpoint->parts.at(0).value;
  }();
  Start(root_);
  ASSERT_TRUE(rollback_->Resume(root_, {0}).ok()) << err_.str();
  // Before rank 0 sets it up again, it says how its checkpoint numbers its steps: an elastic
  // job's rank 0 sets a shard that restarted in a regroup up so.
  const ShardCheckpoints before = rollback_->Checkpoints();
  EXPECT_FALSE(before.configured);
  EXPECT_EQ(before.num_workers, 1);
  EXPECT_EQ(before.steps_per_epoch, 10);
  Configure();
  EXPECT_EQ(Value(), std::make_pair(at6, int64_t{6}));
  EXPECT_TRUE(core_->resumed());
  EXPECT_TRUE(absl::StrContains(out_.str(), "shard 0: resuming from step 6")) << out_.str();
}

TEST_F(ShardRollbackTest, ADamagedNewerCheckpointIsNamedAndSkipped) {
  Configure();
  Train(0, 7);
  checkpointer_->Flush();
  std::ofstream(CheckpointFolder(root_, 6) + "/" + ShardCheckpointFile(0), std::ios::trunc)
      << "damaged";
  Start(root_);
  ASSERT_TRUE(rollback_->Resume(root_, {0}).ok()) << err_.str();
  Configure();
  EXPECT_EQ(Value().second, 4);
  EXPECT_TRUE(absl::StrContains(err_.str(), "shard 0: skipping a newer checkpoint: ")) << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), CheckpointFolder(root_, 6))) << err_.str();
  // Other shards may still be reading it: it stays until this shard writes again, uncounted.
  EXPECT_TRUE(std::filesystem::exists(CheckpointFolder(root_, 6)));
  EXPECT_EQ(rollback_->Checkpoints().steps, (std::vector<int64_t>{0, 2, 4}));
  Train(4, 7);
  const std::string aside = CheckpointFolder(root_, 6) + ".damaged";
  EXPECT_TRUE(absl::StrContains(out_.str(), absl::StrCat("shard 0: the damaged checkpoint ",
                                                         CheckpointFolder(root_, 6),
                                                         " is kept aside as ", aside,
                                                         " for a person to look at")))
      << out_.str();
  std::ifstream kept(aside + "/" + ShardCheckpointFile(0));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "damaged");
  EXPECT_EQ(rollback_->Checkpoints().steps, (std::vector<int64_t>{0, 2, 4, 6}));
}

TEST_F(ShardRollbackTest, ResumingFromAFolderWithoutCheckpointsNamesTheShardAndTheFolder) {
  const std::string empty = absl::StrCat(TmpDir(), "/no-checkpoints");
  std::filesystem::create_directories(empty);
  const absl::Status s = rollback_->Resume(empty, {0});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("shard 0: cannot resume from ", empty)))
      << s;
}

TEST_F(ShardRollbackTest, AShardWithoutCheckpointsRefusesToRollBackButSaysHowItCounts) {
  Start("");
  Configure();
  const absl::Status s = rollback_->RollBack(4, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--checkpoint_dir")) << s;
  const ShardCheckpoints held = rollback_->Checkpoints();
  EXPECT_TRUE(held.configured);
  EXPECT_TRUE(held.steps.empty());
}

}  // namespace
}  // namespace cohort
