// Replicated parts: a backup that takes its leader's updates stays bitwise equal to it
// (optimizer state and checkpoints included), the workers' answers wait for the backup, and a
// backup that leads the part after its leader died answers the pushes it held already instead
// of applying them twice.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_core_testing.h"

namespace cohort {
namespace {

constexpr PartId kWeights{0, 0};  // 10,000 elements: three of the update's blocks
constexpr PartId kStats{1, 0};    // an auxiliary key's part (batch-norm statistics)
constexpr size_t kWeightsSize = 10000;
constexpr size_t kStatsSize = 5;

// Keeps each forwarded update until the test hands it to the backup.
class QueuedLink final : public BackupLink {
 public:
  void Forward(const LeaderUpdate& update, std::function<void()> done) override {
    absl::MutexLock lock(&mu_);
    queue_.push_back({update, {update.values.begin(), update.values.end()}, std::move(done)});
    if (update.copy != nullptr) queue_.back().copy = *update.copy;
  }
  // Every update forwarded so far reaches backup in order; with `acknowledge`, each one's done
  // runs after (without, the leader is taken to have died before hearing back).
  void Deliver(ShardCore* backup, bool acknowledge = true) {
    std::vector<Pending> taken;
    {
      absl::MutexLock lock(&mu_);
      taken.swap(queue_);
    }
    for (Pending& p : taken) {
      p.update.values = p.values;
      if (p.copy.has_value()) p.update.copy = &*p.copy;
      const absl::Status applied = backup->ApplyLeaderUpdate(p.update);
      EXPECT_TRUE(applied.ok()) << applied;
      if (acknowledge) p.done();
    }
  }
  bool broken() const override { return false; }
  size_t pending() {
    absl::MutexLock lock(&mu_);
    return queue_.size();
  }

 private:
  struct Pending {
    LeaderUpdate update;
    std::vector<float> values;
    std::function<void()> done;
    std::optional<PartCopy> copy;
  };
  absl::Mutex mu_;
  std::vector<Pending> queue_ ABSL_GUARDED_BY(mu_);
};

ShardConfig TwoPartConfig(int workers, KVStoreMode mode, const std::string& optimizer) {
  ShardConfig c = Config(workers, mode, /*parts=*/2);
  c.optimizer.optimizer = optimizer;
  c.auxiliary_keys = {kStats.key};
  return c;
}

// leads: false for a backup of shard 0's parts (as Init adds them on the shard backing up).
void Start(ShardCore* core, const ShardConfig& config, CheckpointSink* checkpoints = nullptr,
           bool leads = true) {
  if (checkpoints != nullptr) core->set_checkpoints(2, checkpoints);
  ASSERT_TRUE(core->Configure(config).ok());
  ASSERT_TRUE(core->AddPart(kWeights, Gradient(7, 1, kWeightsSize), /*share=*/0, leads).ok());
  ASSERT_TRUE(core->AddPart(kStats, Gradient(8, 2, kStatsSize), /*share=*/0, leads).ok());
}

void ExpectSameCheckpoint(const ShardCheckpoint& got, const ShardCheckpoint& want) {
  ASSERT_EQ(got.parts.size(), want.parts.size());
  for (size_t i = 0; i < want.parts.size(); ++i) {
    EXPECT_EQ(got.parts[i].id, want.parts[i].id);
    EXPECT_EQ(got.parts[i].version, want.parts[i].version);
    EXPECT_EQ(got.parts[i].value, want.parts[i].value);
    EXPECT_EQ(got.parts[i].optimizer.tensors, want.parts[i].optimizer.tensors);
  }
}

std::pair<std::vector<float>, int64_t> Held(ShardCore* core, PartId id) {
  std::vector<float> value;
  const absl::StatusOr<int64_t> version = core->Read(id, &value);
  EXPECT_TRUE(version.ok()) << version.status();
  return {value, version.value_or(-1)};
}

// rank's push of both parts at `step`, computed on `version`.
void PushBoth(ShardCore* core, int rank, int step, int64_t version, PartSink* sink) {
  ASSERT_TRUE(core->Push(rank, kWeights, version, Gradient(rank, step, kWeightsSize), sink).ok());
  ASSERT_TRUE(core->Push(rank, kStats, version, Gradient(rank + 3, step, kStatsSize), sink).ok());
}

// A leader whose parts' updates go to `backup` through `link`, and a shard without a backup
// for the test to give the same pushes.
struct Replicated {
  explicit Replicated(const ShardConfig& config) {
    Start(&leader, config);
    Start(&backup, config);
    Start(&alone, config);
    EXPECT_TRUE(leader.SetBackup(kWeights, &link).ok());
    EXPECT_TRUE(leader.SetBackup(kStats, &link).ok());
  }
  ShardCore leader{0}, backup{1}, alone{2};
  QueuedLink link;
};

// Three workers train six steps on a leader whose backup takes every update: the answers of
// each step wait for the backup; the backup ends bitwise equal to the leader, and the leader
// to a shard without a backup. Only the leader gives checkpoints; once the leader died and the
// backup leads (two more steps), the backup's checkpoint (values and optimizer state) is the
// one the shard without a backup gives.
TEST(ShardCoreReplicationTest, ABackupStaysBitwiseEqualToItsLeader) {
  for (KVStoreMode mode : {KVStoreMode::kDistSync, KVStoreMode::kDistAsync}) {
    for (const std::string optimizer : {"sgd", "adam"}) {
      SCOPED_TRACE(absl::StrCat(KVStoreModeName(mode), " ", optimizer));
      const ShardConfig config = TwoPartConfig(3, mode, optimizer);
      MemoryCheckpoints leader_checkpoints, backup_checkpoints, alone_checkpoints;
      ShardCore leader(0), backup(1), alone(2);
      Start(&leader, config, &leader_checkpoints);
      Start(&backup, config, &backup_checkpoints, /*leads=*/false);
      Start(&alone, config, &alone_checkpoints);
      QueuedLink link;
      ASSERT_TRUE(leader.SetBackup(kWeights, &link).ok());
      ASSERT_TRUE(leader.SetBackup(kStats, &link).ok());
      std::vector<RecordingSink> sinks(3), alone_sinks(3);
      for (int step = 0; step < 6; ++step) {
        for (int r = 0; r < 3; ++r) {
          // dist_async: each push is computed on the version its worker heard last.
          const int64_t on = mode == KVStoreMode::kDistSync ? step
                             : sinks[r].versions.empty() ? 0
                                                         : sinks[r].versions.back();
          PushBoth(&leader, r, step, on, &sinks[r]);
          PushBoth(&alone, r, step, on, &alone_sinks[r]);
          if (mode == KVStoreMode::kDistAsync) {
            EXPECT_EQ(sinks[r].versions.size(), 2u * step) << "answered before the backup had it";
            link.Deliver(&backup);
            EXPECT_EQ(sinks[r].versions.size(), 2u * (step + 1));
          }
        }
        if (mode == KVStoreMode::kDistSync) {
          for (const RecordingSink& s : sinks) {
            EXPECT_EQ(s.versions.size(), 2u * step) << "answered before the backup had it";
          }
          EXPECT_EQ(link.pending(), 2u);
          link.Deliver(&backup);
          for (const RecordingSink& s : sinks) {
            ASSERT_EQ(s.versions.size(), 2u * (step + 1));
            EXPECT_EQ(s.versions.back(), step + 1);
          }
        }
      }
      for (PartId id : {kWeights, kStats}) {
        EXPECT_EQ(Held(&backup, id), Held(&leader, id));
        EXPECT_EQ(Held(&leader, id), Held(&alone, id));
      }
      for (int r = 0; r < 3; ++r) EXPECT_EQ(sinks[r].values, alone_sinks[r].values);
      ASSERT_EQ(leader_checkpoints.steps.size(), 4u);  // steps 0, 2, 4, 6
      for (const auto& [step, saved] : leader_checkpoints.steps) {
        ExpectSameCheckpoint(saved, alone_checkpoints.steps.at(step));
      }
      EXPECT_TRUE(backup_checkpoints.steps.empty()) << "a backup gave checkpoints";
      EXPECT_EQ(backup_checkpoints.held, (std::map<int, int>{{0, 2}}));
      // The leader died with every update held by its backup: the workers push to it.
      for (int step = 6; step < 8; ++step) {
        for (int r = 0; r < 3; ++r) {
          const int64_t on = mode == KVStoreMode::kDistSync ? step : sinks[r].versions.back();
          PushBoth(&backup, r, step, on, &sinks[r]);
          PushBoth(&alone, r, step, on, &alone_sinks[r]);
        }
      }
      ASSERT_EQ(backup_checkpoints.steps.size(), 1u);  // step 8, the first after it led
      ExpectSameCheckpoint(backup_checkpoints.steps.at(8), alone_checkpoints.steps.at(8));
      EXPECT_EQ(backup_checkpoints.shares.at(8), (std::vector<int>{0, 0}));
    }
  }
}

// dist_sync: the leader dies after its backup took step 0's update but before it answered.
// The workers push step 0 again to the backup, which now leads the part: each is answered at
// once with version 1, not applied again; step 1 is applied as usual, and the part is bitwise
// what a shard that never failed holds.
TEST(ShardCoreReplicationTest, ABackupThatLeadsAnswersThePushesItHeldAndAppliesTheNext) {
  const ShardConfig config = TwoPartConfig(2, KVStoreMode::kDistSync, "sgd");
  Replicated shards(config);
  ShardCore &leader = shards.leader, &backup = shards.backup, &alone = shards.alone;
  QueuedLink& link = shards.link;
  std::vector<RecordingSink> lost(2), sinks(2), alone_sinks(2);
  for (int r = 0; r < 2; ++r) {
    PushBoth(&leader, r, 0, 0, &lost[r]);
    PushBoth(&alone, r, 0, 0, &alone_sinks[r]);
  }
  link.Deliver(&backup, /*acknowledge=*/false);
  EXPECT_TRUE(lost[0].versions.empty());
  for (int r = 0; r < 2; ++r) {
    PushBoth(&backup, r, 0, 0, &sinks[r]);
    EXPECT_EQ(sinks[r].versions, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(sinks[r].values, alone_sinks[r].values);
  }
  EXPECT_EQ(Held(&backup, kWeights).second, 1);
  for (int r = 0; r < 2; ++r) {
    PushBoth(&backup, r, 1, 1, &sinks[r]);
    PushBoth(&alone, r, 1, 1, &alone_sinks[r]);
  }
  for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&backup, id), Held(&alone, id));
  EXPECT_EQ(sinks[1].values, alone_sinks[1].values);
  // A push of a version before the one the leader forwarded is stale as ever.
  RecordingSink late;
  EXPECT_FALSE(backup.Push(0, kWeights, 0, Gradient(0, 0, kWeightsSize), &late).ok());
}

// dist_async: the leader dies after its backup took worker 0's push; worker 0 sends it again
// to the backup, which answers it without applying it twice, then applies worker 1's.
TEST(ShardCoreReplicationTest, AnAsyncBackupAppliesEachPushOnce) {
  const ShardConfig config = TwoPartConfig(2, KVStoreMode::kDistAsync, "sgd");
  Replicated shards(config);
  ShardCore &leader = shards.leader, &backup = shards.backup, &alone = shards.alone;
  QueuedLink& link = shards.link;
  RecordingSink lost, again, other, alone_sink;
  PushBoth(&leader, 0, 0, 0, &lost);
  link.Deliver(&backup, /*acknowledge=*/false);
  PushBoth(&backup, 0, 0, 0, &again);
  EXPECT_EQ(again.versions, (std::vector<int64_t>{1, 1}));
  PushBoth(&backup, 1, 0, 0, &other);
  EXPECT_EQ(other.versions, (std::vector<int64_t>{2, 2}));
  PushBoth(&alone, 0, 0, 0, &alone_sink);
  PushBoth(&alone, 1, 0, 0, &alone_sink);
  for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&backup, id), Held(&alone, id));
}

// A leader that lost its backup trains on alone; a shard that came back (never initialised by
// rank 0) becomes its backup mid-training: it takes the parts' copies (value, version,
// optimizer state, whose pushes they hold; dist_async's auxiliary part: each rank's latest
// push), then the updates, and stays bitwise equal to a shard that never failed. The leader
// dies before it answers a step: the workers' pushes of that step are answered by the new
// backup from what it holds, the next step applied as usual.
TEST(ShardCoreReplicationTest, AShardThatCameBackTakesACopyMidTrainingAndCanLeadFromIt) {
  for (const KVStoreMode mode : {KVStoreMode::kDistSync, KVStoreMode::kDistAsync}) {
    for (const std::string optimizer : {"sgd", "adam"}) {
      SCOPED_TRACE(absl::StrCat(KVStoreModeName(mode), " ", optimizer));
      const ShardConfig config = TwoPartConfig(2, mode, optimizer);
      ShardCore leader(0), alone(2), joiner(3);
      Start(&leader, config);
      Start(&alone, config);
      ShardConfig settings = config;
      settings.num_parts = 0;  // the copies bring them
      ASSERT_TRUE(joiner.Configure(settings).ok());
      std::vector<RecordingSink> sinks(2), alone_sinks(2), lost(2);
      // Each worker pushes on the version its last answer brought (dist_async: they differ).
      std::vector<int64_t> seen(2, 0);
      auto step = [&](ShardCore* to, int s, std::vector<RecordingSink>& answers) {
        for (int r = 0; r < 2; ++r) {
          PushBoth(to, r, s, seen[r], &answers[r]);
          PushBoth(&alone, r, s, seen[r], &alone_sinks[r]);
          if (mode == KVStoreMode::kDistAsync) seen[r] = alone_sinks[r].versions.back();
        }
        if (mode == KVStoreMode::kDistSync) seen.assign(2, alone_sinks[0].versions.back());
      };
      for (int s = 0; s < 3; ++s) step(&leader, s, sinks);
      QueuedLink link;
      bool copied = false;
      ASSERT_TRUE(leader.AddBackup({kWeights, kStats}, 0, &link, [&] { copied = true; }).ok());
      EXPECT_EQ(link.pending(), 2u);
      link.Deliver(&joiner);
      EXPECT_TRUE(copied);
      for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&joiner, id), Held(&alone, id));
      for (int s = 3; s < 5; ++s) {
        step(&leader, s, sinks);
        link.Deliver(&joiner);
      }
      for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&joiner, id), Held(&alone, id));
      // Step 5 reaches the joiner, but the leader dies before answering it.
      const std::vector<int64_t> before = seen;
      step(&leader, 5, lost);
      link.Deliver(&joiner, /*acknowledge=*/false);
      const size_t answered = sinks[0].versions.size();
      for (int r = 0; r < 2; ++r) PushBoth(&joiner, r, 5, before[r], &sinks[r]);
      EXPECT_EQ(sinks[0].versions.size(), answered + 2);  // at once, from what it holds
      for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&joiner, id), Held(&alone, id));
      step(&joiner, 6, sinks);
      for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&joiner, id), Held(&alone, id));
      EXPECT_EQ(sinks[1].values.back(), alone_sinks[1].values.back());
    }
  }
}

// The leader dies after its backup took step 0 but before it answered; the backup, leading now,
// gets a new backup (a shard that came back) before the workers' step 0 comes again: those
// pushes, answered from what the part holds, go as soon as the new backup holds the copy, not
// after an update that would never come.
TEST(ShardCoreReplicationTest, APushAnsweredFromWhatIsHeldWaitsOnlyForTheNewBackupsCopy) {
  const ShardConfig config = TwoPartConfig(2, KVStoreMode::kDistSync, "sgd");
  Replicated shards(config);
  std::vector<RecordingSink> lost(2), sinks(2);
  for (int r = 0; r < 2; ++r) PushBoth(&shards.leader, r, 0, 0, &lost[r]);
  shards.link.Deliver(&shards.backup, /*acknowledge=*/false);
  ShardCore joiner(3);
  ShardConfig settings = config;
  settings.num_parts = 0;
  ASSERT_TRUE(joiner.Configure(settings).ok());
  QueuedLink to_joiner;
  bool copied = false;
  ASSERT_TRUE(
      shards.backup.AddBackup({kWeights, kStats}, 0, &to_joiner, [&] { copied = true; }).ok());
  PushBoth(&shards.backup, 0, 0, 0, &sinks[0]);
  EXPECT_TRUE(sinks[0].versions.empty());  // the copy is not held yet
  to_joiner.Deliver(&joiner);
  EXPECT_TRUE(copied);
  EXPECT_EQ(sinks[0].versions, (std::vector<int64_t>{1, 1}));
  PushBoth(&shards.backup, 1, 0, 0, &sinks[1]);
  EXPECT_EQ(sinks[1].versions, (std::vector<int64_t>{1, 1}));  // at once: the joiner holds it
}

// A link that gave up is dropped: its parts answer at once, as without a backup.
TEST(ShardCoreReplicationTest, APartWhoseLinkIsDroppedGoesOnWithoutABackup) {
  const ShardConfig config = TwoPartConfig(2, KVStoreMode::kDistSync, "sgd");
  Replicated shards(config);
  shards.leader.DropBackupLink(&shards.link);
  std::vector<RecordingSink> sinks(2);
  for (int r = 0; r < 2; ++r) PushBoth(&shards.leader, r, 0, 0, &sinks[r]);
  EXPECT_EQ(sinks[0].versions, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(shards.link.pending(), 0u);
}

// Updates a backup cannot take are refused, naming the part, the versions and why.
TEST(ShardCoreReplicationTest, AnUpdateOutOfOrderOrForALeaderOrOfAnotherSizeIsRefused) {
  const ShardConfig config = TwoPartConfig(2, KVStoreMode::kDistSync, "sgd");
  ShardCore leader(0), backup(1);
  Start(&leader, config);
  Start(&backup, config);
  QueuedLink link;
  ASSERT_TRUE(leader.SetBackup(kWeights, &link).ok());
  const std::vector<float> values(kWeightsSize, 0.5f);
  const absl::Status skipped = backup.ApplyLeaderUpdate({kWeights, 2, 0.1f, values, -1, 1});
  EXPECT_EQ(skipped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(skipped.message(), "shard 1: the update of key 0 part 0 to "
                                                   "version 2 came while its backup is at "
                                                   "version 0"))
      << skipped;
  const absl::Status led = leader.ApplyLeaderUpdate({kWeights, 1, 0.1f, values, -1, 0});
  EXPECT_TRUE(absl::StrContains(led.message(), "this one leads the part")) << led;
  const absl::Status short_one =
      backup.ApplyLeaderUpdate({kWeights, 1, 0.1f, absl::MakeConstSpan(values).first(10), -1, 0});
  EXPECT_EQ(short_one.code(), absl::StatusCode::kInvalidArgument) << short_one;
  EXPECT_EQ(Held(&backup, kWeights).second, 0);
}

// A worker's stream that ends while its answer waits for the backup is not written to.
TEST(ShardCoreReplicationTest, AnAnswerHeldForTheBackupIsDroppedWhenItsStreamEnds) {
  const ShardConfig config = TwoPartConfig(2, KVStoreMode::kDistSync, "sgd");
  Replicated shards(config);
  ShardCore &leader = shards.leader, &backup = shards.backup;
  QueuedLink& link = shards.link;
  RecordingSink gone, stays;
  PushBoth(&leader, 0, 0, 0, &gone);
  PushBoth(&leader, 1, 0, 0, &stays);
  leader.Detach(&gone);
  link.Deliver(&backup);
  EXPECT_TRUE(gone.versions.empty());
  EXPECT_EQ(stays.versions, (std::vector<int64_t>{1, 1}));
}

}  // namespace
}  // namespace cohort
