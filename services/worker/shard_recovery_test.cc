// The worker's recovery of its data path against a fake transport (playing the shards) and a
// fake job membership: a shard that died and came back, a new generation of workers, and
// failures while recovering.

#include "services/worker/shard_recovery.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/worker/fake_shards.h"

namespace cohort {
namespace {

using testing_fakes::ExpectStopped;
using testing_fakes::Filled;
using testing_fakes::Pushed;
using testing_fakes::Sgd;

class ShardRecoveryTest : public testing_fakes::StoreOnFakesTest {
 protected:
  // Rank 0 waits for key 0's answers when shard 1 dies; it comes back from its
  // checkpoint at step 40. The wait's failure.
  absl::Status Shard1DiesAndComesBackAt40() {
    Make(0);
    PushKey0();
    const absl::Status failure = WaitWhile([&] {
      absl::SleepFor(absl::Milliseconds(20));
      transport_->EndStream(1, absl::UnavailableError("Socket closed"));
    });
    membership_->ShardCameBack(1, "fake-1-again");
    transport_->ResumeAt(40);
    return failure;
  }

  // Rank 0 of an elastic job of 3 workers at 10 steps an epoch (12 for 2 workers) waits for
  // key 0's answers when the scheduler starts generation 1 of 2 workers; the shards hold
  // checkpoints `held`. The wait's failure.
  absl::Status ThreeWorkersBecomeTwo(absl::Duration restart_grace,
                                     std::vector<std::vector<int64_t>> held) {
    Make(0, KVStoreMode::kDistSync, absl::Seconds(30), restart_grace, /*workers=*/3);
    OptimizerSpec spec = Sgd();
    spec.lr_schedule.steps_per_epoch = 10;
    EXPECT_TRUE(kv_->SetOptimizer(spec).ok());
    kv_->SetUpdateRuleFor([spec](int workers) {
      OptimizerSpec s = spec;
      s.lr_schedule.steps_per_epoch = workers == 2 ? 12 : 10;
      return s;
    });
    transport_->HoldCheckpoints(std::move(held), 3, 10);
    PushKey0();
    return WaitWhile([&] {
      absl::SleepFor(absl::Milliseconds(20));
      membership_->NewGeneration(/*rank=*/0, /*num_workers=*/2);
    });
  }
};

// A shard dies and comes back from its checkpoint at step 40: after both barriers rank 0 has
// set the restarted shard up again and rolled the other back to step 40, the streams go to the
// shards' new addresses, and training goes on from step 40.
TEST_F(ShardRecoveryTest, RecoversFromAShardThatCameBackByRollingEveryShardBack) {
  const absl::Status failure = Shard1DiesAndComesBackAt40();
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  ASSERT_TRUE(kv_->Recover(failure).ok());
  EXPECT_EQ(membership_->barriers(),
            (std::vector<std::string>{"kvstore init", "generation 0: shard recovery: streams closed",
                                      "generation 0: shard recovery: shards rolled back"}));
  EXPECT_EQ(transport_->addresses(), (std::vector<std::string>{"fake-0", "fake-1-again"}));
  const std::vector<ShardConfig> configs = transport_->configs();
  ASSERT_EQ(configs.size(), 3u);  // both at the start, then the restarted one
  EXPECT_EQ(configs.back().num_parts, configs[1].num_parts);
  EXPECT_EQ(transport_->rolled_back(), (std::vector<std::pair<int, int64_t>>{{0, 40}}));
  Tensor value0(Shape{6}), value1(Shape{3});
  ASSERT_TRUE(kv_->Pull(0, &value0).ok());
  ASSERT_TRUE(kv_->Pull(1, &value1).ok());
  EXPECT_EQ(*kv_->StartStep(), 40);
  // The streams are open again: a push goes out on version 40.
  ASSERT_TRUE(kv_->PushPull(0, grad_, &value0).ok());
  for (const Pushed& p : transport_->TakePushed()) EXPECT_EQ(p.version, 40);
}

// Shard 1 comes back at step 40, and shard 0 dies while rank 0 rolls it back: rank 0 waits for
// shard 0 to come back too, sets both up, and every shard is at step 40 without a failure.
TEST_F(ShardRecoveryTest, AShardDyingDuringTheRollBackIsWaitedForAndSetUpToo) {
  const absl::Status failure = Shard1DiesAndComesBackAt40();
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  transport_->OnNextRollBack([&](int shard) {
    membership_->ShardCameBack(shard, "fake-0-again");
    return absl::UnavailableError(absl::StrCat("rolling shard ", shard, ": connection refused"));
  });
  ASSERT_TRUE(kv_->Recover(failure).ok());
  EXPECT_EQ(transport_->addresses(), (std::vector<std::string>{"fake-0-again", "fake-1-again"}));
  EXPECT_EQ(transport_->configs().size(), 4u);  // both at the start, then each restarted one
  EXPECT_TRUE(transport_->rolled_back().empty());  // both resumed at step 40 themselves
  Tensor value0(Shape{6}), value1(Shape{3});
  ASSERT_TRUE(kv_->Pull(0, &value0).ok());
  ASSERT_TRUE(kv_->Pull(1, &value1).ok());
  EXPECT_EQ(*kv_->StartStep(), 40);
}

// A shard dies again right after the recovery, before the parameters are pulled: the pull's
// failure names the shard, and recovering from it works as from a stream's end.
TEST_F(ShardRecoveryTest, APullFromAShardThatDiedMeanwhileIsRecoveredFrom) {
  const absl::Status failure = Shard1DiesAndComesBackAt40();
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  ASSERT_TRUE(kv_->Recover(failure).ok());
  transport_->DieUnnoticed();
  Tensor value0(Shape{6}), value1(Shape{3});
  const absl::Status pulled = kv_->Pull(0, &value0);
  ASSERT_EQ(pulled.code(), absl::StatusCode::kUnavailable) << pulled;
  EXPECT_EQ(LostShard(pulled), std::optional<int>(0)) << pulled;
  membership_->ShardCameBack(0, "fake-0-again");
  ASSERT_TRUE(kv_->Recover(pulled).ok());
  ASSERT_TRUE(kv_->Pull(0, &value0).ok());
  ASSERT_TRUE(kv_->Pull(1, &value1).ok());
  EXPECT_EQ(*kv_->StartStep(), 40);
}

// Shard 0 restarts just as rank 0 finished rolling it back: the workers follow it to its new
// address without anyone setting it up, so the first pull from it fails. Rank 0 takes it for a
// shard that came back (its incarnation is not the one rank 0 set up), sets it up and rolls
// back again, rather than wait for a restart that already happened.
TEST_F(ShardRecoveryTest, AShardRestartedAfterTheRollBackIsSetUpAtTheNextFailure) {
  const absl::Status failure = Shard1DiesAndComesBackAt40();
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  membership_->set_restart_grace(absl::Milliseconds(200));
  transport_->OnNextRollBack([&](int) {
    membership_->ShardCameBack(0, "fake-0-again");
    return absl::OkStatus();  // the old process took the roll back, then died
  });
  ASSERT_TRUE(kv_->Recover(failure).ok());
  EXPECT_EQ(transport_->addresses(), (std::vector<std::string>{"fake-0-again", "fake-1-again"}));
  EXPECT_EQ(transport_->configs().size(), 3u);  // shard 0's new process not set up yet
  transport_->DieUnnoticed();
  Tensor value0(Shape{6}), value1(Shape{3});
  const absl::Status pulled = kv_->Pull(0, &value0);
  ASSERT_EQ(pulled.code(), absl::StatusCode::kUnavailable) << pulled;
  ASSERT_TRUE(kv_->Recover(pulled).ok());
  EXPECT_EQ(transport_->configs().size(), 4u);  // now it is
  ASSERT_TRUE(kv_->Pull(0, &value0).ok());
  ASSERT_TRUE(kv_->Pull(1, &value1).ok());
  EXPECT_EQ(*kv_->StartStep(), 40);
}

// An elastic job's worker dies while rank 0 of 3 waits for its answers: the scheduler's new
// generation (of 2 workers) ends the wait; the store regroups in it: rank 0 takes the newest
// checkpoint both shards hold (step 20 of 10 steps an epoch), renumbered for 2 workers (12 steps
// an epoch: step 24), and the shards go on under generation 1 with 2 workers; pushes carry the
// new generation and rank.
TEST_F(ShardRecoveryTest, ANewGenerationEndsTheWaitAndRegroupsOnTheNewestCommonCheckpoint) {
  const absl::Status failure =
      ThreeWorkersBecomeTwo(absl::ZeroDuration(), {{0, 10, 20, 30}, {0, 10, 20}});
  ASSERT_EQ(ChangedGeneration(failure), 1) << failure;
  ExpectStopped(transport_, kv_.get());
  ASSERT_TRUE(kv_->Recover(failure).ok());
  EXPECT_EQ(kv_->rank(), 0);
  EXPECT_EQ(kv_->num_workers(), 2);
  EXPECT_EQ(membership_->barriers(),
            (std::vector<std::string>{"kvstore init", "generation 1: streams closed",
                                      "generation 1: shards ready"}));
  EXPECT_EQ(transport_->rolled_back(), (std::vector<std::pair<int, int64_t>>{{0, 20}, {1, 20}}));
  const std::vector<Regeneration> next = transport_->regenerations();
  ASSERT_EQ(next.size(), 2u);
  for (const Regeneration& r : next) {
    EXPECT_EQ(r.step, 24);
    EXPECT_EQ(r.config.generation, 1);
    EXPECT_EQ(r.config.num_workers, 2);
    EXPECT_EQ(r.config.optimizer.lr_schedule.steps_per_epoch, 12);
  }
  Tensor value0(Shape{6}), value1(Shape{3});
  ASSERT_TRUE(kv_->Pull(0, &value0).ok());
  ASSERT_TRUE(kv_->Pull(1, &value1).ok());
  EXPECT_EQ(*kv_->StartStep(), 24);
  ASSERT_TRUE(kv_->PushPull(0, grad_, &value0).ok());
  for (const Pushed& p : transport_->TakePushed()) {
    EXPECT_EQ(p.version, 24);
    EXPECT_EQ(p.generation, 1);
    EXPECT_EQ(p.rank, 0);
  }
}

// An elastic Python program's reset (cohort.torch.elastic) without a failure: CatchUp commits
// a store that had not, leaves one of the job's current generation as it is, and regroups one
// that heard of a new generation, as Recover would have.
TEST_F(ShardRecoveryTest, CatchUpCommitsAndRegroupsOnlyWhenTheWorkersChanged) {
  Make(0, KVStoreMode::kDistSync, absl::Seconds(30), absl::ZeroDuration(), /*workers=*/3);
  transport_->HoldCheckpoints({{0, 10}, {0, 10}}, 3, 10);
  ASSERT_TRUE(kv_->CatchUp().ok());
  EXPECT_EQ(membership_->barriers(), (std::vector<std::string>{"kvstore init"}));
  ASSERT_TRUE(kv_->CatchUp().ok());
  EXPECT_EQ(membership_->barriers().size(), 1u);
  EXPECT_FALSE(kv_->WorkersChanged());
  membership_->NewGeneration(/*rank=*/0, /*num_workers=*/2);
  EXPECT_TRUE(kv_->WorkersChanged());
  ASSERT_TRUE(kv_->CatchUp().ok());
  EXPECT_FALSE(kv_->WorkersChanged());
  EXPECT_EQ(kv_->num_workers(), 2);
  EXPECT_EQ(membership_->barriers(),
            (std::vector<std::string>{"kvstore init", "generation 1: streams closed",
                                      "generation 1: shards ready"}));
  EXPECT_EQ(transport_->rolled_back(), (std::vector<std::pair<int, int64_t>>{{0, 10}, {1, 10}}));
  Tensor value0(Shape{6});
  ASSERT_TRUE(kv_->Pull(0, &value0).ok());
  const Tensor grad = Filled(Shape{6}, 1);
  ASSERT_TRUE(kv_->PushPull(0, grad, &value0).ok());
  const std::vector<Pushed> pushed = transport_->TakePushed();
  ASSERT_FALSE(pushed.empty());
  for (const Pushed& p : pushed) EXPECT_EQ(p.generation, 1);
}

// A worker joins while rank 0 rolls the shards back after a shard came back: the scheduler's
// new generation (3 workers) fails the roll back's second barrier, and the workers regroup in
// it instead, on the checkpoint the restarted shard resumed from (step 40 of 10 steps an
// epoch: step 28 of 7).
TEST_F(ShardRecoveryTest, AWorkerJoiningDuringARollBackRegroupsTheNewGeneration) {
  Make(0);
  kv_->SetUpdateRuleFor([](int workers) {
    OptimizerSpec s = Sgd();
    s.lr_schedule.steps_per_epoch = workers == 3 ? 7 : 10;
    return s;
  });
  transport_->HoldCheckpoints({{20, 40}, {40}}, 2, 10);
  PushKey0();
  const absl::Status failure =
      WaitWhile([&] { transport_->EndStream(1, absl::UnavailableError("Socket closed")); });
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  membership_->ShardCameBack(1, "fake-1-again");
  transport_->ResumeAt(40);
  transport_->OnNextRollBack([&](int) {
    membership_->NewGeneration(/*rank=*/0, /*num_workers=*/3);
    return absl::OkStatus();
  });
  ASSERT_TRUE(kv_->Recover(failure).ok());
  EXPECT_EQ(membership_->barriers(),
            (std::vector<std::string>{"kvstore init", "generation 0: shard recovery: streams closed",
                                      "generation 0: shard recovery: shards rolled back",
                                      "generation 1: streams closed",
                                      "generation 1: shards ready"}));
  EXPECT_EQ(kv_->num_workers(), 3);
  EXPECT_EQ(transport_->rolled_back(),
            (std::vector<std::pair<int, int64_t>>{{0, 40}, {0, 40}, {1, 40}}));
  for (const Regeneration& r : transport_->regenerations()) {
    EXPECT_EQ(r.step, 28);
    EXPECT_EQ(r.config.generation, 1);
    EXPECT_EQ(r.config.num_workers, 3);
  }
  Tensor value0(Shape{6}), value1(Shape{3});
  ASSERT_TRUE(kv_->Pull(0, &value0).ok());
  ASSERT_TRUE(kv_->Pull(1, &value1).ok());
  EXPECT_EQ(*kv_->StartStep(), 28);
  ASSERT_TRUE(kv_->PushPull(0, grad_, &value0).ok());
  for (const Pushed& p : transport_->TakePushed()) {
    EXPECT_EQ(p.version, 28);
    EXPECT_EQ(p.generation, 1);
  }
}

// The job moves on again while rank 0 regroups the shards (one more worker joined): the
// regroup starts over in the newest generation, and the shards go on there.
TEST_F(ShardRecoveryTest, AGenerationChangeDuringARegroupRegroupsAgainInTheNewest) {
  const absl::Status failure =
      ThreeWorkersBecomeTwo(absl::ZeroDuration(), {{10, 20}, {10, 20}});
  ASSERT_EQ(ChangedGeneration(failure), 1) << failure;
  transport_->OnNextRollBack([&](int) {
    membership_->NewGeneration(/*rank=*/0, /*num_workers=*/3);
    return absl::OkStatus();
  });
  ASSERT_TRUE(kv_->Recover(failure).ok());
  EXPECT_EQ(membership_->barriers(),
            (std::vector<std::string>{"kvstore init", "generation 1: streams closed",
                                      "generation 1: shards ready", "generation 2: streams closed",
                                      "generation 2: shards ready"}));
  EXPECT_EQ(kv_->num_workers(), 3);
  const std::vector<Regeneration> next = transport_->regenerations();
  ASSERT_EQ(next.size(), 4u);
  EXPECT_EQ(next.back().config.generation, 2);
  ASSERT_TRUE(kv_->PushPull(0, grad_, &out_).ok());
  for (const Pushed& p : transport_->TakePushed()) EXPECT_EQ(p.generation, 2);
}

// A shard dies while rank 0 regroups the shards for a new generation, after shard 0 went on
// (its step 24 written for 2 workers): rank 0 waits for it, sets it up as its checkpoint (of 3
// workers) was written, and every shard goes to the step of the first try, 20 as step 24,
// though shard 0 now numbers its steps for 2 workers; the other workers dial it anew.
TEST_F(ShardRecoveryTest, AShardDyingDuringARegroupIsWaitedForAndTheRegroupGoesOnAsPlanned) {
  const absl::Status failure =
      ThreeWorkersBecomeTwo(absl::Seconds(60), {{10, 20}, {10, 20}});
  ASSERT_EQ(ChangedGeneration(failure), 1) << failure;
  transport_->TrackRegenerations();
  int rolls = 0;
  std::function<absl::Status(int)> second_dies = [&](int shard) {
    if (++rolls == 1) {  // shard 0 goes on; shard 1 dies as it is told
      transport_->OnNextRollBack(second_dies);
      return absl::OkStatus();
    }
    transport_->ShardRestarted(shard, {10, 20});
    transport_->ResumeAt(20);
    membership_->ShardCameBack(shard, "fake-1-again");
    return absl::UnavailableError(absl::StrCat("rolling shard ", shard, ": connection refused"));
  };
  transport_->OnNextRollBack(second_dies);
  const absl::Status recovered = kv_->Recover(failure);
  ASSERT_TRUE(recovered.ok()) << recovered;
  EXPECT_EQ(transport_->addresses(), (std::vector<std::string>{"fake-0", "fake-1-again"}));
  const std::vector<ShardConfig> configs = transport_->configs();
  ASSERT_EQ(configs.size(), 3u);  // both at the start, then the restarted one
  EXPECT_EQ(configs.back().num_workers, 3);
  EXPECT_EQ(configs.back().optimizer.lr_schedule.steps_per_epoch, 10);
  // Shard 0 once, then both again from the same plan.
  EXPECT_EQ(transport_->rolled_back(),
            (std::vector<std::pair<int, int64_t>>{{0, 20}, {0, 20}, {1, 20}}));
  const std::vector<Regeneration> next = transport_->regenerations();
  ASSERT_EQ(next.size(), 3u);
  for (const Regeneration& r : next) {
    EXPECT_EQ(r.step, 24);
    EXPECT_EQ(r.config.num_workers, 2);
    EXPECT_EQ(r.config.generation, 1);
  }
}

// Without shard restarts (no grace), a shard dying while rank 0 regroups the shards fails the
// recovery with both the first failure and the shard's, and the store keeps failing so,
// sending nothing.
TEST_F(ShardRecoveryTest, WithoutShardRestartsAShardDyingDuringARegroupFailsNamingBoth) {
  const absl::Status failure =
      ThreeWorkersBecomeTwo(absl::ZeroDuration(), {{10, 20}, {10, 20}});
  ASSERT_EQ(ChangedGeneration(failure), 1) << failure;
  transport_->OnNextRollBack([](int shard) {
    return absl::UnavailableError(
        absl::StrCat("roll back of shard ", shard, " at fake-", shard, ": connection refused"));
  });
  const absl::Status recovered = kv_->Recover(failure);
  EXPECT_EQ(recovered.code(), absl::StatusCode::kUnavailable) << recovered;
  EXPECT_TRUE(absl::StrContains(recovered.message(), failure.message())) << recovered;
  EXPECT_TRUE(absl::StrContains(recovered.message(), "; then, recovering: roll back of shard 0 "
                                                     "at fake-0: connection refused"))
      << recovered;
  const absl::Status again = kv_->PushPull(0, grad_, &out_);
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable) << again;
  EXPECT_TRUE(transport_->TakePushed().empty());
}


TEST(RenumberStepTest, KeepsTheEpochAndTheShareOfItDone) {
  EXPECT_EQ(RenumberStep(20, 10, 12), 24);  // epoch 2, its start
  EXPECT_EQ(RenumberStep(25, 10, 15), 37);  // epoch 2, half done: 7 of 15
  EXPECT_EQ(RenumberStep(29, 10, 5), 14);   // epoch 2, 9 of 10: 4 of 5
  EXPECT_EQ(RenumberStep(9, 10, 30), 27);   // the last step of epoch 0 goes to 27 of 30
  EXPECT_EQ(RenumberStep(7, 10, 10), 7);
}

// What is not a shard's death (a refused answer, the job's end) is not recovered from.
TEST_F(ShardRecoveryTest, OtherFailuresAreNotRecoveredFrom) {
  Make(0);
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status failure = WaitWhile([&] {
    transport_->Answer(pushed[0].shard, pushed[0].id, pushed[0].version + 5, pushed[0].values);
  });
  ASSERT_EQ(failure.code(), absl::StatusCode::kInternal) << failure;
  EXPECT_EQ(kv_->Recover(failure), failure);
  EXPECT_EQ(membership_->barriers(), std::vector<std::string>{"kvstore init"});
}

// A dead shard's stream in a job that does not restart shards: the failure stands.
TEST_F(ShardRecoveryTest, WithoutShardRestartsADeadShardIsNotWaitedFor) {
  Make(0, KVStoreMode::kDistSync, absl::Seconds(30), /*restart_grace=*/absl::ZeroDuration());
  PushKey0();
  const absl::Status failure =
      WaitWhile([&] { transport_->EndStream(1, absl::UnavailableError("Socket closed")); });
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  EXPECT_EQ(kv_->Recover(failure), failure);
  EXPECT_EQ(membership_->barriers(), std::vector<std::string>{"kvstore init"});
}

}  // namespace
}  // namespace cohort
