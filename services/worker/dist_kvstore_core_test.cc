// The worker's kvstore core against a fake transport (playing the shards) and a fake job
// membership: no sockets. Every failure a shard or the network can cause ends a wait with its
// documented error, the streams closed and the caller's tensors released.

#include "services/worker/dist_kvstore_core.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "trainer/kvstore/partition.h"

namespace cohort {
namespace {

class FakeMembership final : public JobMembership {
 public:
  FakeMembership(int rank, int num_workers, int num_shards)
      : rank_(rank), num_workers_(num_workers) {
    for (int s = 0; s < num_shards; ++s) {
      shards_.addresses.push_back(absl::StrCat("fake-", s));
      shards_.incarnations.push_back(absl::StrCat("host pid-", s));
    }
    shards_.restart_grace = absl::Seconds(60);
    shards_.rank = rank;
    shards_.num_workers = num_workers;
  }

  int rank() const override { return rank_; }
  int num_workers() const override { return num_workers_; }
  std::string name() const override { return absl::StrCat("worker ", rank_); }
  absl::StatusOr<uint64_t> Barrier(const std::string& name, uint64_t fingerprint,
                                   int64_t generation) override {
    absl::MutexLock lock(&mu_);
    barriers_.push_back(name);
    if (generation != shards_.generation) {
      return MembershipChangedError(shards_.generation, "the fake moved on");
    }
    return fingerprint;
  }
  int OnGenerationChange(std::function<void(int64_t)> f) override {
    absl::MutexLock lock(&listeners_mu_);
    generation_listeners_.emplace_back(next_, std::move(f));
    return next_++;
  }
  int64_t generation() const override {
    absl::MutexLock lock(&mu_);
    return shards_.generation;
  }
  // The scheduler starts a new generation in which this worker has `rank` of `num_workers`.
  void NewGeneration(int rank, int num_workers) {
    int64_t generation;
    {
      absl::MutexLock lock(&mu_);
      generation = ++shards_.generation;
      shards_.rank = rank;
      shards_.num_workers = num_workers;
    }
    absl::MutexLock lock(&listeners_mu_);
    for (auto& [id, f] : generation_listeners_) f(generation);
  }
  int OnEnd(std::function<void()> f) override {
    absl::MutexLock lock(&listeners_mu_);
    listeners_.emplace_back(next_, std::move(f));
    return next_++;
  }
  void RemoveEndListener(int id) override {
    absl::MutexLock lock(&listeners_mu_);
    const auto is_id = [id](const auto& listener) { return listener.first == id; };
    listeners_.erase(std::remove_if(listeners_.begin(), listeners_.end(), is_id),
                     listeners_.end());
    generation_listeners_.erase(
        std::remove_if(generation_listeners_.begin(), generation_listeners_.end(), is_id),
        generation_listeners_.end());
  }
  absl::Status end_status() const override {
    absl::MutexLock lock(&mu_);
    return end_;
  }
  absl::StatusOr<ShardsView> WaitForShards(absl::Duration) override {
    absl::MutexLock lock(&mu_);
    return shards_;
  }
  // A shard came back: another process at another address.
  void ShardCameBack(int shard, std::string address) {
    absl::MutexLock lock(&mu_);
    shards_.addresses.at(shard) = std::move(address);
    shards_.incarnations.at(shard) += " again";
  }
  void set_restart_grace(absl::Duration grace) {
    absl::MutexLock lock(&mu_);
    shards_.restart_grace = grace;
  }

  // The scheduler ends the job. Listeners run under their own lock, as MemberSession's do.
  void End(absl::Status why) {
    {
      absl::MutexLock lock(&mu_);
      end_ = why;
    }
    absl::MutexLock lock(&listeners_mu_);
    for (auto& [id, f] : listeners_) f();
  }
  std::vector<std::string> barriers() const {
    absl::MutexLock lock(&mu_);
    return barriers_;
  }
  int listeners() const {
    absl::MutexLock lock(&listeners_mu_);
    return static_cast<int>(listeners_.size() + generation_listeners_.size());
  }

 private:
  const int rank_, num_workers_;
  mutable absl::Mutex listeners_mu_;
  std::vector<std::pair<int, std::function<void()>>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  std::vector<std::pair<int, std::function<void(int64_t)>>> generation_listeners_
      ABSL_GUARDED_BY(listeners_mu_);
  int next_ ABSL_GUARDED_BY(listeners_mu_) = 0;
  mutable absl::Mutex mu_;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> barriers_ ABSL_GUARDED_BY(mu_);
  ShardsView shards_ ABSL_GUARDED_BY(mu_);
};

// One push as the fake shards received it.
struct Pushed {
  int shard;
  PartId id;
  int64_t version;
  int rank;
  std::vector<float> values;
  int64_t generation;
};

// The shards, played by the test: it records what the store sends (holding each push's pin, as
// a transport still writing would, until answered or closed) and answers when, how and in
// what order the test says.
class FakeTransport final : public ShardTransport {
 public:
  explicit FakeTransport(int num_shards) : num_shards_(num_shards) {}

  int num_shards() const override { return num_shards_; }
  std::string shard_address(int shard) const override { return absl::StrCat("fake-", shard); }
  absl::StatusOr<int64_t> InitShard(int shard, const ShardConfig& config,
                                    absl::Span<const InitialPart> parts) override {
    absl::MutexLock lock(&mu_);
    if (dead_) return absl::UnavailableError("connection refused");
    configs_.push_back(config);
    for (const InitialPart& p : parts) {
      if (initial_.count({p.id.key, p.id.part}) == 0) {  // a restarted shard keeps its checkpoint
        initial_[{p.id.key, p.id.part}] = std::vector<float>(p.value.begin(), p.value.end());
      }
      init_shard_[{p.id.key, p.id.part}] = shard;
    }
    return resumed_ ? resumed_step_ : -1;
  }
  absl::Status RollBack(int shard, int64_t step,
                        const std::optional<Regeneration>& next) override {
    absl::MutexLock lock(&mu_);
    rolled_back_.emplace_back(shard, step);
    if (next.has_value()) {
      regenerations_.push_back(*next);
      resumed_step_ = next->step;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<ShardCheckpoints> ListCheckpoints(int shard) override {
    absl::MutexLock lock(&mu_);
    ShardCheckpoints held = held_;
    held.steps = checkpoints_.at(shard);
    return held;
  }
  void Redial(std::vector<std::string> addresses) override {
    absl::MutexLock lock(&mu_);
    addresses_ = std::move(addresses);
    closed_ = false;
    dead_ = false;
  }
  void Open(AnswerReceiver* receiver) override {
    absl::MutexLock lock(&mu_);
    receiver_ = receiver;
  }
  void Send(int shard, const OutgoingPart& part) override {
    const PartHeader& h = part.header;
    const absl::Span<const float> values = part.values;
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    part.pin->Pin();
    pins_.push_back(part.pin);
    pushed_.push_back(
        {shard, h.id, h.version, h.rank, {values.begin(), values.end()}, h.generation});
  }
  void Flush() override {
    absl::MutexLock lock(&mu_);
    ++flushes_;
  }
  int flushes() const {
    absl::MutexLock lock(&mu_);
    return flushes_;
  }
  void Close() override {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    ReleasePins();
  }
  absl::StatusOr<PartHeader> Pull(int shard, PartId id, std::vector<float>* out) override {
    absl::MutexLock lock(&mu_);
    if (dead_) return absl::UnavailableError("connection refused");
    *out = initial_.at({id.key, id.part});
    return PartHeader{id, resumed_step_, -1};
  }

  // A restarted shard's Init answers this step, and every pull this version.
  void ResumeAt(int64_t step) {
    absl::MutexLock lock(&mu_);
    resumed_ = true;
    resumed_step_ = step;
  }
  // The checkpoints each shard holds (ListCheckpoints), numbered for this many workers and
  // steps an epoch.
  void HoldCheckpoints(std::vector<std::vector<int64_t>> steps, int num_workers,
                       int64_t steps_per_epoch) {
    absl::MutexLock lock(&mu_);
    checkpoints_ = std::move(steps);
    held_ = {{}, true, num_workers, steps_per_epoch};
  }
  std::vector<Regeneration> regenerations() const {
    absl::MutexLock lock(&mu_);
    return regenerations_;
  }
  std::vector<std::pair<int, int64_t>> rolled_back() const {
    absl::MutexLock lock(&mu_);
    return rolled_back_;
  }
  std::vector<std::string> addresses() const {
    absl::MutexLock lock(&mu_);
    return addresses_;
  }

  // Delivers an answer as the stream would (nothing after Close). values: the part's new value.
  void Answer(int shard, PartId id, int64_t version, const std::vector<float>& values) {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    const absl::Span<const char> bytes(reinterpret_cast<const char*>(values.data()),
                                       values.size() * sizeof(float));
    const cohort::Answer answer{PartHeader{id, version, -1}, ByteChunks(&bytes, 1)};
    receiver_->OnAnswers(shard, absl::MakeConstSpan(&answer, 1));
  }
  // Answers a recorded push as a correct dist_sync shard would: version + 1, value = push × 10.
  void AnswerCorrectly(const Pushed& p) {
    std::vector<float> value = p.values;
    for (float& v : value) v *= 10;
    Answer(p.shard, p.id, p.version + 1, value);
  }
  // The shard's stream ends (it died, or the network cut it).
  void EndStream(int shard, absl::Status why) {
    absl::MutexLock lock(&mu_);
    dead_ = true;
    if (!closed_ && receiver_ != nullptr) receiver_->OnStreamEnd(shard, why);
  }
  // The transport has written every push: pins go.
  void ReleasePins() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (PinCount* pin : pins_) pin->Unpin();
    pins_.clear();
  }
  void WrittenAll() {
    absl::MutexLock lock(&mu_);
    ReleasePins();
  }

  std::vector<Pushed> TakePushed() {
    absl::MutexLock lock(&mu_);
    return std::move(pushed_);
  }
  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }
  std::vector<ShardConfig> configs() const {
    absl::MutexLock lock(&mu_);
    return configs_;
  }
  int init_shard(PartId id) const {
    absl::MutexLock lock(&mu_);
    return init_shard_.at({id.key, id.part});
  }

 private:
  const int num_shards_;
  mutable absl::Mutex mu_;
  AnswerReceiver* receiver_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int flushes_ ABSL_GUARDED_BY(mu_) = 0;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<PinCount*> pins_ ABSL_GUARDED_BY(mu_);
  std::vector<Pushed> pushed_ ABSL_GUARDED_BY(mu_);
  std::vector<ShardConfig> configs_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int>, std::vector<float>> initial_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int>, int> init_shard_ ABSL_GUARDED_BY(mu_);
  bool resumed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t resumed_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<int64_t>> checkpoints_ ABSL_GUARDED_BY(mu_);
  ShardCheckpoints held_ ABSL_GUARDED_BY(mu_);
  std::vector<Regeneration> regenerations_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, int64_t>> rolled_back_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
};

constexpr int kShards = 2;
constexpr int64_t kPartBytes = 8;  // 2 floats: key 0 (6 floats) in 3 parts, key 1 (3) in 2

OptimizerSpec Sgd() {
  OptimizerSpec spec;
  spec.lr_schedule.base_lr = 0.1;
  spec.lr_schedule.steps_per_epoch = 10;
  return spec;
}

Tensor Filled(const Shape& shape, float first) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = first + i;
  return t;
}

// A store of rank `rank` of 2 on the fakes, with keys 0 (6,) and 1 (3,) initialised.
class DistKVStoreCoreTest : public ::testing::Test {
 protected:
  // restart_grace: the scheduler's wait for a dead shard, as the store learns it at the start.
  void Make(int rank = 0, KVStoreMode mode = KVStoreMode::kDistSync,
            absl::Duration answer_timeout = absl::Seconds(30),
            absl::Duration restart_grace = absl::Seconds(60), int workers = 2) {
    membership_ = std::make_unique<FakeMembership>(rank, workers, kShards);
    membership_->set_restart_grace(restart_grace);
    auto transport = std::make_unique<FakeTransport>(kShards);
    transport_ = transport.get();
    DistKVStoreOptions options;
    options.part_bytes = kPartBytes;
    options.answer_timeout = answer_timeout;
    kv_ = std::make_unique<DistKVStoreCore>(mode, membership_.get(), std::move(transport),
                                            *membership_->WaitForShards(absl::ZeroDuration()),
                                            options);
    ASSERT_TRUE(kv_->SetOptimizer(Sgd()).ok());
    ASSERT_TRUE(kv_->Init(0, Filled(Shape{6}, 1)).ok());
    ASSERT_TRUE(kv_->Init(1, Filled(Shape{3}, 100)).ok());
  }

  // Pushes key 0's gradient (1..6) and returns the parts that reached the fake shards.
  std::vector<Pushed> PushKey0() {
    grad_ = Filled(Shape{6}, 1);
    out_ = Tensor(Shape{6});
    EXPECT_TRUE(kv_->PushPull(0, grad_, &out_).ok());
    std::vector<Pushed> pushed = transport_->TakePushed();
    EXPECT_EQ(pushed.size(), 3u);
    return pushed;
  }

  // Waits for key 0 on another thread while `answer` runs here; returns the wait's status.
  absl::Status WaitWhile(const std::function<void()>& answer) {
    absl::Status status;
    std::thread waiter([&] { status = kv_->Wait(0); });
    answer();
    waiter.join();
    return status;
  }

  std::unique_ptr<FakeMembership> membership_;
  FakeTransport* transport_ = nullptr;
  std::unique_ptr<DistKVStoreCore> kv_;
  Tensor grad_, out_;
};

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
  for (const Part& p : map->parts) EXPECT_EQ(transport_->init_shard({p.key, p.index}), p.shard);
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

// Every wait that fails must leave the streams closed and every pin released, so the caller
// may free its tensors.
void ExpectStopped(FakeTransport* transport, KVStore* kv) {
  EXPECT_TRUE(transport->closed());
  Tensor grad(Shape{3}), out(Shape{3});
  const absl::Status again = kv->PushPull(1, grad, &out);
  EXPECT_FALSE(again.ok()) << "a store that failed keeps failing";
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
  ExpectStopped(transport_, kv_.get());
}

// A shard dies and comes back from its checkpoint at step 40: after both barriers rank 0 has
// set the restarted shard up again and rolled the other back to step 40, the streams go to the
// shards' new addresses, and training goes on from step 40.
TEST_F(DistKVStoreCoreTest, RecoversFromAShardThatCameBackByRollingEveryShardBack) {
  Make(0);
  std::vector<Pushed> pushed = PushKey0();
  const absl::Status failure = WaitWhile([&] {
    absl::SleepFor(absl::Milliseconds(20));
    transport_->EndStream(1, absl::UnavailableError("Socket closed"));
  });
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  membership_->ShardCameBack(1, "fake-1-again");
  transport_->ResumeAt(40);
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

// An elastic job's worker dies while rank 0 of 3 waits for its answers: the scheduler's new
// generation (of 2 workers) ends the wait; the store regroups in it: rank 0 takes the newest
// checkpoint both shards hold (step 20 of 10 steps an epoch), renumbered for 2 workers (12 steps
// an epoch: step 24), and the shards go on under generation 1 with 2 workers; pushes carry the
// new generation and rank.
TEST_F(DistKVStoreCoreTest, ANewGenerationEndsTheWaitAndRegroupsOnTheNewestCommonCheckpoint) {
  Make(0, KVStoreMode::kDistSync, absl::Seconds(30), absl::ZeroDuration(), /*workers=*/3);
  OptimizerSpec spec = Sgd();
  spec.lr_schedule.steps_per_epoch = 10;
  ASSERT_TRUE(kv_->SetOptimizer(spec).ok());
  kv_->SetUpdateRuleFor([spec](int workers) {
    OptimizerSpec s = spec;
    s.lr_schedule.steps_per_epoch = workers == 2 ? 12 : 10;
    return s;
  });
  transport_->HoldCheckpoints({{0, 10, 20, 30}, {0, 10, 20}}, 3, 10);
  PushKey0();
  const absl::Status failure = WaitWhile([&] {
    absl::SleepFor(absl::Milliseconds(20));
    membership_->NewGeneration(/*rank=*/0, /*num_workers=*/2);
  });
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

TEST(RenumberStepTest, KeepsTheEpochAndTheShareOfItDone) {
  EXPECT_EQ(RenumberStep(20, 10, 12), 24);  // epoch 2, its start
  EXPECT_EQ(RenumberStep(25, 10, 15), 37);  // epoch 2, half done: 7 of 15
  EXPECT_EQ(RenumberStep(29, 10, 5), 14);   // epoch 2, 9 of 10: 4 of 5
  EXPECT_EQ(RenumberStep(9, 10, 30), 27);   // the last step of epoch 0 goes to 27 of 30
  EXPECT_EQ(RenumberStep(7, 10, 10), 7);
}

// What is not a shard's death (a refused answer, the job's end) is not recovered from.
TEST_F(DistKVStoreCoreTest, OtherFailuresAreNotRecoveredFrom) {
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
TEST_F(DistKVStoreCoreTest, WithoutShardRestartsADeadShardIsNotWaitedFor) {
  Make(0, KVStoreMode::kDistSync, absl::Seconds(30), /*restart_grace=*/absl::ZeroDuration());
  PushKey0();
  const absl::Status failure =
      WaitWhile([&] { transport_->EndStream(1, absl::UnavailableError("Socket closed")); });
  ASSERT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
  EXPECT_EQ(kv_->Recover(failure), failure);
  EXPECT_EQ(membership_->barriers(), std::vector<std::string>{"kvstore init"});
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
  kv_ = std::make_unique<DistKVStoreCore>(KVStoreMode::kDistSync, membership_.get(),
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
