#ifndef COHORT_SERVICES_WORKER_FAKE_SHARDS_H_
#define COHORT_SERVICES_WORKER_FAKE_SHARDS_H_

// A fake job membership and fake shards (a transport the test plays), and a store on them:
// the tests of the worker's data path and of its recovery, without sockets.

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/membership/job_membership.h"
#include "services/worker/dist_kvstore.h"
#include "services/worker/shard_transport.h"

namespace cohort {
namespace testing_fakes {

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
  // Every worker is taken to bring what this one does.
  absl::StatusOr<std::vector<std::string>> Exchange(const std::string& name, std::string payload,
                                                    int64_t generation) override {
    const absl::StatusOr<uint64_t> passed = Barrier(name, 0, generation);
    if (!passed.ok()) return passed.status();
    return std::vector<std::string>(num_workers_, payload);
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
  void set_replicas(int replicas) {
    absl::MutexLock lock(&mu_);
    shards_.replicas = replicas;
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
  float lr;
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
    if (const auto it = restarted_.find(shard); it != restarted_.end()) {
      it->second = {it->second.steps, true, config.num_workers,
                    config.optimizer.lr_schedule.steps_per_epoch};
    }
    for (const InitialPart& p : parts) {
      if (initial_.count({p.id.key, p.id.part}) == 0) {  // a restarted shard keeps its checkpoint
        initial_[{p.id.key, p.id.part}] = std::vector<float>(p.value.begin(), p.value.end());
      }
      (p.backup ? backup_shard_ : init_shard_)[{p.id.key, p.id.part}] = shard;
    }
    return resumed_ ? resumed_step_ : -1;
  }
  absl::Status RollBack(int shard, int64_t step,
                        const std::optional<Regeneration>& next) override {
    std::function<absl::Status(int)> hook;
    {
      absl::MutexLock lock(&mu_);
      hook = std::exchange(roll_back_hook_, nullptr);
    }
    if (hook != nullptr) {
      const absl::Status s = hook(shard);
      if (!s.ok()) return s;
    }
    absl::MutexLock lock(&mu_);
    rolled_back_.emplace_back(shard, step);
    if (next.has_value()) {
      regenerations_.push_back(*next);
      resumed_step_ = next->step;
      // As a shard does: it writes the generation's first step at once, numbered anew.
      if (track_regenerations_) {
        ShardCheckpoints& held = restarted_.try_emplace(shard, held_).first->second;
        if (held.steps.empty()) held.steps = checkpoints_.at(shard);
        held.steps.erase(std::remove_if(held.steps.begin(), held.steps.end(),
                                        [&](int64_t s) { return s > step; }),
                         held.steps.end());
        held.steps.push_back(next->step);
        held.num_workers = next->config.num_workers;
        held.steps_per_epoch = next->config.optimizer.lr_schedule.steps_per_epoch;
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<ShardCheckpoints> ListCheckpoints(int shard) override {
    absl::MutexLock lock(&mu_);
    if (const auto it = restarted_.find(shard); it != restarted_.end()) return it->second;
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
    ended_.clear();
  }
  void Reopen(int shard, const std::string& address, AnswerReceiver* receiver) override {
    absl::MutexLock lock(&mu_);
    reopened_.emplace_back(shard, address);
    ended_.erase(shard);
    dead_ = false;
    receiver_ = receiver;
  }
  std::vector<std::pair<int, std::string>> reopened() const {
    absl::MutexLock lock(&mu_);
    return reopened_;
  }
  void Send(int shard, const OutgoingPart& part) override {
    const PartHeader& h = part.header;
    const absl::Span<const float> values = part.values;
    absl::MutexLock lock(&mu_);
    if (closed_ || ended_.count(shard) > 0) return;  // a stream that ended drops it
    part.pin->Pin();
    pins_.push_back(part.pin);
    pushed_.push_back(
        {shard, h.id, h.version, h.rank, {values.begin(), values.end()}, h.generation, h.lr});
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

  // The next roll back runs `hook` first (the test's moment to change the job) and fails with
  // its error, if any.
  void OnNextRollBack(std::function<absl::Status(int shard)> hook) {
    absl::MutexLock lock(&mu_);
    roll_back_hook_ = std::move(hook);
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
  // From now on each shard's listing follows what happened to it: a regeneration's first
  // step written, numbered for its workers; a restart (ShardRestarted).
  void TrackRegenerations() {
    absl::MutexLock lock(&mu_);
    track_regenerations_ = true;
  }
  // Shard `shard` came back from its checkpoint: not set up, holding `steps`, numbered as its
  // checkpoint says, until InitShard.
  void ShardRestarted(int shard, std::vector<int64_t> steps) {
    absl::MutexLock lock(&mu_);
    restarted_[shard] = {std::move(steps), false, held_.num_workers, held_.steps_per_epoch};
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
  // The shards refuse every call from now on, before any stream has noticed.
  void DieUnnoticed() {
    absl::MutexLock lock(&mu_);
    dead_ = true;
  }
  // The shard's stream ends (it died, or the network cut it).
  void EndStream(int shard, absl::Status why) {
    absl::MutexLock lock(&mu_);
    dead_ = true;
    ended_.insert(shard);
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
  // Replicated shards: the shard that was sent the part to back up (-1: none).
  int backup_shard(PartId id) const {
    absl::MutexLock lock(&mu_);
    const auto it = backup_shard_.find({id.key, id.part});
    return it == backup_shard_.end() ? -1 : it->second;
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
  std::map<std::pair<int64_t, int>, int> backup_shard_ ABSL_GUARDED_BY(mu_);
  std::set<int> ended_ ABSL_GUARDED_BY(mu_);  // shards whose stream ended, until reopened
  std::vector<std::pair<int, std::string>> reopened_ ABSL_GUARDED_BY(mu_);
  bool resumed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t resumed_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<int64_t>> checkpoints_ ABSL_GUARDED_BY(mu_);
  ShardCheckpoints held_ ABSL_GUARDED_BY(mu_);
  bool track_regenerations_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int, ShardCheckpoints> restarted_ ABSL_GUARDED_BY(mu_);  // by shard, once tracked
  std::vector<Regeneration> regenerations_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, int64_t>> rolled_back_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(int)> roll_back_hook_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
};

// Every wait that fails must leave the streams closed and every pin released, so the caller
// may free its tensors.
inline void ExpectStopped(FakeTransport* transport, KVStore* kv) {
  EXPECT_TRUE(transport->closed());
  Tensor grad(Shape{3}), out(Shape{3});
  const absl::Status again = kv->PushPull(1, grad, &out);
  EXPECT_FALSE(again.ok()) << "a store that failed keeps failing";
}

inline constexpr int kShards = 2;
inline constexpr int64_t kPartBytes = 8;  // 2 floats: key 0 (6 floats) in 3 parts, key 1 (3) in 2

inline OptimizerSpec Sgd() {
  OptimizerSpec spec;
  spec.lr_schedule.base_lr = 0.1;
  spec.lr_schedule.steps_per_epoch = 10;
  return spec;
}

inline Tensor Filled(const Shape& shape, float first) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = first + i;
  return t;
}

// A store of rank `rank` of 2 on the fakes, with keys 0 (6,) and 1 (3,) initialised.
class StoreOnFakesTest : public ::testing::Test {
 protected:
  // restart_grace: the scheduler's wait for a dead shard, as the store learns it at the start.
  void Make(int rank = 0, KVStoreMode mode = KVStoreMode::kDistSync,
            absl::Duration answer_timeout = absl::Seconds(30),
            absl::Duration restart_grace = absl::Seconds(60), int workers = 2) {
    membership_ = std::make_unique<FakeMembership>(rank, workers, kShards);
    membership_->set_restart_grace(restart_grace);
    membership_->set_replicas(replicas_);
    auto transport = std::make_unique<FakeTransport>(kShards);
    transport_ = transport.get();
    DistKVStoreOptions options;
    options.part_bytes = kPartBytes;
    options.answer_timeout = answer_timeout;
    kv_ = std::make_unique<DistKVStore>(mode, membership_.get(), std::move(transport),
                                        *membership_->WaitForShards(absl::ZeroDuration()),
                                        options);
    ASSERT_TRUE(kv_->SetOptimizer(Sgd()).ok());
    ASSERT_TRUE(kv_->Init(0, Filled(Shape{6}, 1)).ok());
    ASSERT_TRUE(kv_->Init(1, Filled(Shape{3}, 100)).ok());
  }

  int replicas_ = 1;  // the job's copies of every part, for Make

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
  std::unique_ptr<DistKVStore> kv_;
  Tensor grad_, out_;
};

}  // namespace testing_fakes
}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_FAKE_SHARDS_H_
