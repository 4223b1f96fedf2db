// The worker's data path (the store's core) against a fake transport (playing the shards) and
// a fake job membership: no sockets. Every failure a shard or the network can cause ends a
// wait with its documented error, the streams closed and the caller's tensors released.

#include "services/worker/dist_kvstore_core.h"

#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/worker/fake_shards.h"
#include "trainer/kvstore/partition.h"

namespace cohort {
namespace {

using testing_fakes::ExpectStopped;
using testing_fakes::FakeMembership;
using testing_fakes::FakeTransport;
using testing_fakes::kPartBytes;
using testing_fakes::kShards;
using testing_fakes::Pushed;
using testing_fakes::Filled;
using testing_fakes::Sgd;
using DistKVStoreCoreTest = testing_fakes::StoreOnFakesTest;

TEST_F(DistKVStoreCoreTest, RankZeroInitialisesEveryShardThenAllRanksMeetAtABarrier) {
  Make(0);
  std::vector<Pushed> pushed = PushKey0();
  const auto map = PartitionParameters({{6, 4}, {3, 4}}, kShards, kPartBytes);
  ASSERT_TRUE(map.ok());
  ASSERT_EQ(transport_->configs().size(), 2u);
  int parts = 0;
  for (const ShardConfig& c : transport_->configs()) {
    EXPECT_EQ(c.num_workers, 2);
    EXPECT_EQ(c.mode, KVStoreMode::kDistSync);
    EXPECT_EQ(c.partition_fingerprint, map->Fingerprint());
    EXPECT_EQ(c.optimizer.lr_schedule.base_lr, 0.1);
    parts += c.num_parts;
  }
  EXPECT_EQ(parts, 5);
  for (const Part& p : map->parts) {
    EXPECT_EQ(transport_->init_shard({p.key, p.index}), p.shard);
    EXPECT_EQ(transport_->backup_shard({p.key, p.index}), -1);
  }
  for (const ShardConfig& c : transport_->configs()) EXPECT_EQ(c.backup_address, "");
  EXPECT_EQ(membership_->barriers(), std::vector<std::string>{"kvstore init"});
  // Each part went to the shard holding it, from the gradient's own values, on version 0.
  for (const Pushed& p : pushed) {
    const Part& part = map->parts[map->key_parts[0][p.id.part]];
    EXPECT_EQ(p.shard, part.shard);
    EXPECT_EQ(p.version, 0);
    EXPECT_EQ(p.rank, 0);
    EXPECT_EQ(p.values, std::vector<float>(grad_.data<float>() + part.offset,
                                           grad_.data<float>() + part.offset + part.elements));
  }
}

// With two copies of every part, rank 0 sends each shard its own parts and, marked, those of
// the shard it backs up (the other one), and names its backup's address; pushes still go to
// the part's leader only.
TEST_F(DistKVStoreCoreTest, WithReplicasEveryShardAlsoBacksUpTheOthersParts) {
  replicas_ = 2;
  Make(0);
  const std::vector<Pushed> pushed = PushKey0();
  const auto map = PartitionParameters({{6, 4}, {3, 4}}, kShards, kPartBytes);
  ASSERT_TRUE(map.ok());
  const std::vector<ShardConfig> configs = transport_->configs();
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[0].num_parts, 5);
  EXPECT_EQ(configs[1].num_parts, 5);
  EXPECT_EQ(configs[0].backup_address, "fake-1");
  EXPECT_EQ(configs[1].backup_address, "fake-0");
  for (const Part& p : map->parts) {
    EXPECT_EQ(transport_->init_shard({p.key, p.index}), p.shard);
    EXPECT_EQ(transport_->backup_shard({p.key, p.index}), 1 - p.shard);
  }
  for (const Pushed& p : pushed) {
    EXPECT_EQ(p.shard, map->parts[map->key_parts[0][p.id.part]].shard);
  }
}

TEST_F(DistKVStoreCoreTest, AuxiliaryKeysReachEveryShardsConfig) {
  Make(0);
  ASSERT_TRUE(kv_->InitAuxiliary(2, Tensor(Shape{3})).ok());
  PushKey0();
  ASSERT_EQ(transport_->configs().size(), 2u);
  for (const ShardConfig& c : transport_->configs()) {
    EXPECT_EQ(c.auxiliary_keys, std::vector<int64_t>{2});
  }
}

TEST_F(DistKVStoreCoreTest, OtherRanksDoNotInitialiseShards) {
  Make(1);
  PushKey0();
  EXPECT_TRUE(transport_->configs().empty());
  EXPECT_EQ(membership_->barriers(), std::vector<std::string>{"kvstore init"});
}

TEST_F(DistKVStoreCoreTest, AnswersDelayedAndReorderedLandInPlace) {
  Make();
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    absl::SleepFor(absl::Milliseconds(30));  // the waiter is waiting by now
    for (auto it = pushed.rbegin(); it != pushed.rend(); ++it) transport_->AnswerCorrectly(*it);
    transport_->WrittenAll();
  });
  ASSERT_TRUE(status.ok()) << status;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out_.data<float>()[i], 10.0f * (i + 1)) << i;
  // The next push is computed on the versions the answers carried.
  std::vector<Pushed> next = PushKey0();
  for (const Pushed& p : next) EXPECT_EQ(p.version, 1);
  EXPECT_FALSE(transport_->closed());
}

// The rate SetLearningRate gives goes with every part of the pushes after it, until changed.
TEST_F(DistKVStoreCoreTest, TheLearningRateSetGoesWithEveryPushUntilChanged) {
  Make();
  const auto step = [&] {
    std::vector<Pushed> pushed = PushKey0();
    for (const Pushed& p : pushed) transport_->AnswerCorrectly(p);
    transport_->WrittenAll();
    EXPECT_TRUE(kv_->Wait(0).ok());
    std::vector<float> rates;
    for (const Pushed& p : pushed) rates.push_back(p.lr);
    return rates;
  };
  EXPECT_EQ(step(), std::vector<float>(3, -1.0f));  // the schedule's
  ASSERT_TRUE(kv_->SetLearningRate(0.125f).ok());
  EXPECT_EQ(step(), std::vector<float>(3, 0.125f));
  EXPECT_EQ(step(), std::vector<float>(3, 0.125f));
  EXPECT_EQ(kv_->SetLearningRate(std::numeric_limits<float>::infinity()).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(kv_->SetLearningRate(0).ok());
  EXPECT_EQ(step(), std::vector<float>(3, 0.0f));
  ASSERT_TRUE(kv_->SetLearningRate(-1).ok());
  EXPECT_EQ(step(), std::vector<float>(3, -1.0f));
}

TEST_F(DistKVStoreCoreTest, ALostAnswerEndsTheWaitAfterTheTimeoutNamingThePart) {
  Make(0, KVStoreMode::kDistSync, absl::Milliseconds(200));
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    transport_->AnswerCorrectly(pushed[0]);
    transport_->AnswerCorrectly(pushed[2]);  // part 1's answer is lost
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "worker 0")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("key 0 part 1 from shard ",
                                                               pushed[1].shard, " at fake-")))
      << status;
  ExpectStopped(transport_, kv_.get());
}

TEST_F(DistKVStoreCoreTest, ADuplicateAnswerIsRefused) {
  Make();
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    transport_->AnswerCorrectly(pushed[0]);
    transport_->AnswerCorrectly(pushed[0]);  // would otherwise count for part 1 or 2
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "key 0 part 0 version 1, but this worker has "
                                                  "no push of it waiting"))
      << status;
  ExpectStopped(transport_, kv_.get());
}

TEST_F(DistKVStoreCoreTest, AnAnswerOnTheWrongVersionIsRefused) {
  Make();
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    transport_->Answer(pushed[1].shard, pushed[1].id, 2, pushed[1].values);  // skipped one
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "the push was computed on version 0")) << status;
  ExpectStopped(transport_, kv_.get());
}

TEST_F(DistKVStoreCoreTest, AsyncAcceptsAnyLaterVersionButNotAnEarlierOne) {
  Make(0, KVStoreMode::kDistAsync);
  std::vector<Pushed> pushed = PushKey0();
  absl::Status status = WaitWhile([&] {
    for (const Pushed& p : pushed) transport_->Answer(p.shard, p.id, 7, p.values);
    transport_->WrittenAll();
  });
  ASSERT_TRUE(status.ok()) << status;
  pushed = PushKey0();
  for (const Pushed& p : pushed) EXPECT_EQ(p.version, 7);
  status = WaitWhile([&] { transport_->Answer(pushed[0].shard, pushed[0].id, 7, pushed[0].values); });
  EXPECT_TRUE(absl::StrContains(status.message(), "computed on version 7")) << status;
}

TEST_F(DistKVStoreCoreTest, AnAnswerForAnUnknownPartIsRefused) {
  Make();
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    transport_->Answer(0, PartId{0, 9}, 1, {1, 2});
  });
  EXPECT_TRUE(absl::StrContains(status.message(), "key 0 part 9 version 1, but this worker has "
                                                  "no such part"))
      << status;
  ExpectStopped(transport_, kv_.get());
}

TEST_F(DistKVStoreCoreTest, AnAnswerFromAShardNotHoldingThePartIsRefused) {
  Make();
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    transport_->Answer(1 - pushed[0].shard, pushed[0].id, 1, pushed[0].values);
  });
  EXPECT_TRUE(absl::StrContains(status.message(), "another shard holds it")) << status;
  ExpectStopped(transport_, kv_.get());
}

TEST_F(DistKVStoreCoreTest, ACorruptAnswerOfTheWrongSizeIsRefused) {
  Make();
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    transport_->Answer(pushed[0].shard, pushed[0].id, 1, {1, 2, 3});  // part 0 has 2 elements
  });
  EXPECT_TRUE(absl::StrContains(status.message(), "the part has 2 elements (8 bytes of F32), not the 12 sent")) << status;
  // Nothing was written into the caller's tensor.
  for (int i = 0; i < 2; ++i) EXPECT_NE(out_.data<float>()[i], static_cast<float>(i + 1));
  ExpectStopped(transport_, kv_.get());
}

TEST_F(DistKVStoreCoreTest, AShardDyingMidWaitEndsTheWaitNamingIt) {
  Make();
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status status = WaitWhile([&] {
    transport_->AnswerCorrectly(pushed[0]);
    absl::SleepFor(absl::Milliseconds(20));
    transport_->EndStream(1, absl::UnavailableError("Socket closed"));
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "worker 0: the stream to shard 1 at fake-1 "
                                                  "ended: Socket closed (did the shard die?)"))
      << status;
  // It says which shard it lost, for the scheduler to look for that shard's death.
  EXPECT_EQ(LostShard(status), 1);
  ExpectStopped(transport_, kv_.get());
}

// With replicas, shard 1 dies while rank 0 waits for key 0: once the scheduler names shard 1's
// backup (shard 0, at fake-0) at its place, the store dials it for shard 1's parts and sends it
// the parts shard 1 had not answered, unchanged; their answers complete the wait: no failure,
// no roll back.
TEST_F(DistKVStoreCoreTest, WithReplicasADeadShardsPartsGoToItsBackupAndTheWaitGoesOn) {
  replicas_ = 2;
  Make();
  const std::vector<Pushed> pushed = PushKey0();
  std::vector<Pushed> on_1, again;
  const absl::Status status = WaitWhile([&] {
    for (const Pushed& p : pushed) {
      if (p.shard == 0) transport_->AnswerCorrectly(p);
      if (p.shard == 1) on_1.push_back(p);
    }
    absl::SleepFor(absl::Milliseconds(20));
    transport_->EndStream(1, absl::UnavailableError("Socket closed"));
    absl::SleepFor(absl::Milliseconds(20));  // the store waits for the scheduler's word
    EXPECT_TRUE(transport_->reopened().empty());
    membership_->ShardCameBack(1, "fake-0");
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (transport_->reopened().empty() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::SleepFor(absl::Milliseconds(20));
    again = transport_->TakePushed();
    for (const Pushed& p : again) transport_->AnswerCorrectly(p);
    transport_->WrittenAll();
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_FALSE(on_1.empty());
  EXPECT_EQ(transport_->reopened(), (std::vector<std::pair<int, std::string>>{{1, "fake-0"}}));
  ASSERT_EQ(again.size(), on_1.size());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].shard, 1);
    EXPECT_EQ(again[i].id, on_1[i].id);
    EXPECT_EQ(again[i].version, on_1[i].version);
    EXPECT_EQ(again[i].values, on_1[i].values);
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out_.data<float>()[i], 10.0f * (i + 1)) << i;
  EXPECT_TRUE(transport_->rolled_back().empty());
  EXPECT_FALSE(transport_->closed());
}

// Without a backup named in time the wait fails as a dead shard's does, naming the shard.
TEST_F(DistKVStoreCoreTest, WithReplicasADeadShardNobodyTakesOverFailsTheWait) {
  replicas_ = 2;
  Make();
  PushKey0();
  absl::Status status;
  std::thread waiter([&] { status = kv_->Wait(0); });
  transport_->EndStream(1, absl::UnavailableError("Socket closed"));
  membership_->End(absl::AbortedError("shard 1 is dead: no copy of its parts is left"));
  waiter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "no copy of its parts is left")) << status;
}

TEST_F(DistKVStoreCoreTest, TheJobEndingMidWaitEndsTheWaitWithItsReason) {
  Make();
  PushKey0();
  const absl::Status status = WaitWhile([&] {
    absl::SleepFor(absl::Milliseconds(20));
    membership_->End(absl::AbortedError("the job failed: worker 1 is dead"));
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "worker 1 is dead")) << status;
  ExpectStopped(transport_, kv_.get());
}

// A shard that leaves a job that failed closes its streams before this worker hears the end:
// the wait ends with the job's verdict (its next heartbeat's), not with the closed stream.
TEST_F(DistKVStoreCoreTest, AStreamClosedByAShardLeavingEndsTheWaitWithTheJobsVerdict) {
  Make();
  PushKey0();
  absl::Status status;
  std::thread waiter([&] { status = kv_->Wait(0); });
  transport_->EndStream(1, absl::OkStatus());
  absl::SleepFor(absl::Milliseconds(50));
  membership_->End(absl::AbortedError("the job failed: worker 1 failed: ValueError: boom"));
  waiter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "ValueError: boom")) << status;
}

TEST_F(DistKVStoreCoreTest, PullWithNothingInFlightReadsTheShardsAndNamesAnUnreachableOne) {
  Make();
  Tensor out(Shape{6});
  ASSERT_TRUE(kv_->Pull(0, &out).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.data<float>()[i], 1.0f + i);
  transport_->EndStream(0, absl::UnavailableError("gone"));
  const absl::Status status = kv_->Pull(0, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "pull of key 0 part 0 from shard")) << status;
}

TEST_F(DistKVStoreCoreTest, DestroyingTheStoreStopsItsStreamsAndItsEndListener) {
  Make();
  PushKey0();  // in flight, never answered
  EXPECT_EQ(membership_->listeners(), 2);  // the job's end, a new generation
  kv_.reset();
  EXPECT_EQ(membership_->listeners(), 0);
}

TEST_F(DistKVStoreCoreTest, AFailedInitKeepsFailingWithoutSendingAnything) {
  Make(0);
  transport_->EndStream(1, absl::UnavailableError("down"));  // before the streams open
  Tensor grad(Shape{6}), out(Shape{6});
  const absl::Status first = kv_->PushPull(0, grad, &out);
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable) << first;
  EXPECT_EQ(kv_->PushPull(0, grad, &out), first);
  EXPECT_TRUE(transport_->TakePushed().empty());
  EXPECT_TRUE(membership_->barriers().empty());
}

TEST_F(DistKVStoreCoreTest, RankZeroSaysWhenShardsHoldNoParameters) {
  membership_ = std::make_unique<FakeMembership>(0, 2, kShards);
  auto transport = std::make_unique<FakeTransport>(4);
  transport_ = transport.get();
  DistKVStoreOptions options;  // one key of 3 floats splits into 3 parts at most, for 4 shards
  kv_ = std::make_unique<DistKVStore>(KVStoreMode::kDistSync, membership_.get(),
                                      std::move(transport),
                                      *membership_->WaitForShards(absl::ZeroDuration()),
                                      options);
  ASSERT_TRUE(kv_->SetOptimizer(Sgd()).ok());
  ASSERT_TRUE(kv_->Init(0, Filled(Shape{3}, 1)).ok());
  Tensor grad(Shape{3}), out(Shape{3});
  testing::internal::CaptureStderr();
  ASSERT_TRUE(kv_->PushPull(0, grad, &out).ok());
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(absl::StrContains(said, "worker 0: 1 of 4 shards hold no parameters: the model's "
                                      "parameters split into only 3 parts; start at most 3"))
      << said;
}

TEST_F(DistKVStoreCoreTest, PushingAKeyStillInFlightIsRefused) {
  Make();
  PushKey0();
  Tensor grad(Shape{6}), out(Shape{6});
  const absl::Status status = kv_->PushPull(0, grad, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_FALSE(transport_->closed());
}

}  // namespace
}  // namespace cohort
