#include "services/shard/shard_core.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/metrics_testing.h"
#include "services/shard/shard_core_testing.h"

namespace cohort {
namespace {

// dist_sync: the update equals one optimizer step on (Σ_rank g) / W summed in rank order, at
// the schedule's rate for the version, whatever order the pushes arrive in; every pusher gets
// the new value with the next version.
TEST(ShardCoreTest, SyncUpdateIsTheRankOrderMeanWhateverTheArrivalOrder) {
  const int workers = 3;
  const size_t n = 5;
  ShardCore core(1);
  ASSERT_TRUE(core.Configure(Config(workers, KVStoreMode::kDistSync)).ok());
  std::vector<float> weights = {1, -2, 3, -4, 5};
  ASSERT_TRUE(core.AddPart({7, 2}, weights).ok());
  ASSERT_TRUE(core.ready());
  auto sgd = *MakeOptimizer("sgd", {0.9, 0.01});
  auto schedule = *LrSchedule::Create(Config(1, KVStoreMode::kDistSync).optimizer.lr_schedule);
  std::vector<RecordingSink> sinks(workers);
  const std::vector<std::vector<int>> orders = {{2, 0, 1}, {1, 2, 0}, {0, 1, 2}, {2, 1, 0}};
  for (int step = 0; step < 4; ++step) {
    std::vector<float> sum = Gradient(0, step, n);
    for (int r = 1; r < workers; ++r) {
      const std::vector<float> g = Gradient(r, step, n);
      for (size_t i = 0; i < n; ++i) sum[i] += g[i];
    }
    for (float& s : sum) s *= 1.0f / workers;
    sgd->Update(0, absl::MakeSpan(weights), sum, static_cast<float>(schedule.At(step)));
    for (int r : orders[step]) {
      ASSERT_TRUE(core.Push(r, {7, 2}, step, Gradient(r, step, n), &sinks[r]).ok());
      if (r != orders[step].back()) {
        EXPECT_EQ(sinks[r].values.size(), static_cast<size_t>(step));  // waits for the rest
      }
    }
    for (int r = 0; r < workers; ++r) {
      ASSERT_EQ(sinks[r].values.size(), static_cast<size_t>(step + 1));
      EXPECT_EQ(sinks[r].versions.back(), step + 1);
      EXPECT_EQ(sinks[r].ids.back(), (PartId{7, 2}));
      EXPECT_EQ(sinks[r].values.back(), weights) << "rank " << r << " step " << step;
    }
  }
  std::vector<float> read;
  EXPECT_EQ(*core.Read({7, 2}, &read), 4);
  EXPECT_EQ(read, weights);
}

// The answers of an update go out one after another; no worker is always the last to hear:
// over many updates every tenth of the ranks waits about as long as any other.
TEST(ShardCoreTest, EachUpdateAnswersEveryWorkerOnceAndNoRankIsAlwaysLast) {
  const int workers = 64, updates = 64;
  ShardCore core(0);
  ASSERT_TRUE(core.Configure(Config(workers, KVStoreMode::kDistSync)).ok());
  ASSERT_TRUE(core.AddPart({1, 0}, std::vector<float>(4, 0.0f)).ok());
  // Where in its update's answers each rank came, by update.
  std::vector<std::vector<int>> place(updates, std::vector<int>(workers, -1));
  struct PlaceSink final : PartSink {
    void Send(PartId, int64_t version, absl::Span<const float>, PinCount*) override {
      std::vector<int>& at = (*place)[version - 1];
      EXPECT_EQ(at[rank], -1) << "rank " << rank << " answered twice in update " << version;
      at[rank] = (*sent)++;
    }
    std::vector<std::vector<int>>* place;
    int* sent;
    int rank;
  };
  std::vector<int> sent(updates, 0);
  std::vector<PlaceSink> sinks(workers);
  for (int step = 0; step < updates; ++step) {
    for (int r = 0; r < workers; ++r) {
      sinks[r].place = &place;
      sinks[r].sent = &sent[step];
      sinks[r].rank = r;
      ASSERT_TRUE(core.Push(r, {1, 0}, step, Gradient(r, step, 4), &sinks[r]).ok());
    }
    EXPECT_EQ(sent[step], workers) << "update " << step + 1;
  }
  const int tenth = workers / 10;
  for (int first = 0; first + tenth <= workers; first += tenth) {
    double mean = 0;
    for (const std::vector<int>& at : place) {
      for (int r = first; r < first + tenth; ++r) mean += at[r];
    }
    mean /= updates * tenth;
    EXPECT_GT(mean, workers / 4.0) << "ranks " << first << ".." << first + tenth - 1;
    EXPECT_LT(mean, workers * 3 / 4.0) << "ranks " << first << ".." << first + tenth - 1;
  }
}

// NaN or an infinity in a push is refused before it touches anything, counted, and named; the
// worker's next good push of that version is taken.
TEST(ShardCoreTest, NonFinitePushesAreRefusedNamingTheWorker) {
  ShardCore core(2);
  ProcessMetrics process("job", "shard", 2);
  ShardMetrics metrics(process);
  core.set_metrics(&metrics);
  ASSERT_TRUE(core.Configure(Config(1, KVStoreMode::kDistSync)).ok());
  const std::vector<float> initial = {1, 2, 3};
  ASSERT_TRUE(core.AddPart({5, 0}, initial).ok());
  RecordingSink sink;
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    const absl::Status s = core.Push(0, {5, 0}, 0, std::vector<float>{0.5f, bad, 0}, &sink);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(s.message(), "shard 2: worker 0's push of key 5 part 0 for "
                                               "version 0 holds NaN or infinite values"))
        << s;
  }
  std::vector<float> value;
  EXPECT_EQ(*core.Read({5, 0}, &value), 0);
  EXPECT_EQ(value, initial);
  EXPECT_TRUE(sink.values.empty());
  EXPECT_EQ(metrics.rejected[static_cast<int>(Rejection::kNonFinite)]->Value(), 3);
  ASSERT_TRUE(core.Push(0, {5, 0}, 0, std::vector<float>{0.5f, 1, 0}, &sink).ok());
  EXPECT_EQ(sink.versions.back(), 1);
  core.set_metrics(nullptr);
}

// A config asking for more workers or parts than any job has is refused before anything is
// sized by it.
TEST(ShardCoreTest, ConfigsBeyondTheBoundsAreRefused) {
  for (auto [workers, parts] : {std::pair{ShardCore::kMaxWorkers + 1, 1}, std::pair{0, 1},
                                std::pair{2, ShardCore::kMaxParts + 1}, std::pair{2, -1}}) {
    ShardCore core;
    const absl::Status s = core.Configure(Config(workers, KVStoreMode::kDistSync, parts));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << workers << " " << parts;
  }
  ShardCore largest;
  EXPECT_TRUE(largest.Configure(Config(ShardCore::kMaxWorkers, KVStoreMode::kDistSync)).ok());
}

TEST(ShardCoreTest, ConcurrentPushesOfManyPartsAllComplete) {
  const int workers = 4, parts = 16;
  ShardCore core(0);
  ASSERT_TRUE(core.Configure(Config(workers, KVStoreMode::kDistSync, parts)).ok());
  for (int p = 0; p < parts; ++p) ASSERT_TRUE(core.AddPart({p, 0}, std::vector<float>(100, 1)).ok());
  std::vector<RecordingSink> sinks(workers);
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      for (int step = 0; step < 3; ++step) {
        for (int p = 0; p < parts; ++p) {
          // Wait for this part's previous answer before pushing the next version.
          while (true) {
            absl::MutexLock lock(&sinks[r].mu_);
            if (std::count(sinks[r].ids.begin(), sinks[r].ids.end(), PartId{p, 0}) == step) break;
            sinks[r].mu_.Unlock();
            std::this_thread::yield();
            sinks[r].mu_.Lock();
          }
          ASSERT_TRUE(core.Push(r, {p, 0}, step, std::vector<float>(100, 0.5f), &sinks[r]).ok());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < workers; ++r) EXPECT_EQ(sinks[r].values.size(), 3u * parts);
}

TEST(ShardCoreTest, BadPushesAreRejectedSayingWhy) {
  ShardCore core(2);
  RecordingSink sink;
  EXPECT_EQ(core.Push(0, {1, 0}, 0, std::vector<float>(3), &sink).message(),
            "shard 2: push of key 1 part 0 before rank 0 finished initialising the shard");
  ASSERT_TRUE(core.Configure(Config(2, KVStoreMode::kDistSync)).ok());
  EXPECT_FALSE(core.Configure(Config(2, KVStoreMode::kDistSync)).ok());
  ASSERT_TRUE(core.AddPart({1, 0}, std::vector<float>(3)).ok());
  EXPECT_EQ(core.Push(0, {9, 0}, 0, std::vector<float>(3), &sink).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(core.Push(0, {1, 0}, 0, std::vector<float>(4), &sink).message(),
            "shard 2: worker 0's push of key 1 part 0 has 16 bytes of F32 values; the part has "
            "3 elements (12 bytes)");
  EXPECT_EQ(core.Push(0, {1, 0}, 5, std::vector<float>(3), &sink).message(),
            "shard 2: worker 0's push of key 1 part 0 was computed on version 5 but the part is "
            "at version 0: every worker must push every key once per step");
  ASSERT_TRUE(core.Push(0, {1, 0}, 0, std::vector<float>(3), &sink).ok());
  EXPECT_EQ(core.Push(0, {1, 0}, 0, std::vector<float>(3), &sink).message(),
            "shard 2: worker 0's push of key 1 part 0 came twice for version 0");
  EXPECT_EQ(core.Push(2, {1, 0}, 0, std::vector<float>(3), &sink).code(),
            absl::StatusCode::kInvalidArgument);
}

// The same pushes in many arrival orders, each part's in its own shuffle, give bitwise the
// same parameters: the reduction does not depend on timing.
TEST(ShardCoreTest, ShuffledArrivalOrdersGiveBitwiseEqualResults) {
  const int workers = 4, parts = 3, steps = 6;
  const size_t n = 257;
  const auto run = [&](uint32_t seed) {
    ShardCore core(0);
    EXPECT_TRUE(core.Configure(Config(workers, KVStoreMode::kDistSync, parts)).ok());
    for (int p = 0; p < parts; ++p) {
      std::vector<float> init(n);
      for (size_t i = 0; i < n; ++i) init[i] = std::sin(0.1f * i + p);
      EXPECT_TRUE(core.AddPart({p, 0}, init).ok());
    }
    std::mt19937 rng(seed);
    std::vector<RecordingSink> sinks(workers);
    for (int step = 0; step < steps; ++step) {
      std::vector<std::pair<int, int>> pushes;  // (part, rank)
      for (int p = 0; p < parts; ++p) {
        for (int r = 0; r < workers; ++r) pushes.push_back({p, r});
      }
      std::shuffle(pushes.begin(), pushes.end(), rng);
      for (auto [p, r] : pushes) {
        std::vector<float> g = Gradient(r, step, n);
        for (float& x : g) x *= 1.0f + 0.37f * p;  // values whose float sums depend on order
        EXPECT_TRUE(core.Push(r, {p, 0}, step, g, &sinks[r]).ok());
      }
    }
    std::vector<float> all;
    for (int p = 0; p < parts; ++p) {
      std::vector<float> v;
      EXPECT_EQ(*core.Read({p, 0}, &v), steps);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<float> first = run(1);
  for (uint32_t seed = 2; seed <= 20; ++seed) {
    const std::vector<float> other = run(seed);
    ASSERT_EQ(other.size(), first.size());
    EXPECT_EQ(std::memcmp(other.data(), first.data(), first.size() * sizeof(float)), 0)
        << "arrival order " << seed;
  }
}

// A push in pieces cut anywhere (a float across two chunks) is the same push.
TEST(ShardCoreTest, PushesArriveInByteChunksCutAnywhere) {
  ShardCore whole(0), chunked(0);
  for (ShardCore* core : {&whole, &chunked}) {
    ASSERT_TRUE(core->Configure(Config(1, KVStoreMode::kDistSync)).ok());
    ASSERT_TRUE(core->AddPart({0, 0}, std::vector<float>(5, 1.0f)).ok());
  }
  const std::vector<float> g = Gradient(0, 0, 5);
  const char* b = reinterpret_cast<const char*>(g.data());
  const std::vector<absl::Span<const char>> chunks = {{b, 3}, {b + 3, 6}, {b + 9, 11}};
  RecordingSink a, c;
  ASSERT_TRUE(whole.Push(0, {0, 0}, 0, g, &a).ok());
  ASSERT_TRUE(chunked.Push(PartHeader{{0, 0}, 0, 0}, ByteChunks(chunks), &c).ok());
  EXPECT_EQ(a.values, c.values);
}

// A compressed push is the F32 push of its decoded values: the same update, bit for bit, with
// two workers in rank order.
TEST(ShardCoreTest, CompressedPushesApplyTheirDecodedValues) {
  const std::vector<float> g0 = Gradient(0, 0, 9), g1 = Gradient(1, 0, 9);
  for (WireEncoding e : {WireEncoding::kF16, WireEncoding::kBF16, WireEncoding::kTwoBit}) {
    ShardCore plain(0), compressed(0);
    for (ShardCore* core : {&plain, &compressed}) {
      ASSERT_TRUE(core->Configure(Config(2, KVStoreMode::kDistSync)).ok());
      ASSERT_TRUE(core->AddPart({0, 0}, std::vector<float>(9, 1.0f)).ok());
    }
    const float threshold = e == WireEncoding::kTwoBit ? 0.25f : 0.0f;
    RecordingSink plain_sink, compressed_sink;
    for (int rank : {1, 0}) {
      const std::vector<float>& g = rank == 0 ? g0 : g1;
      std::vector<float> residual(g.size(), 0.0f);
      std::string bytes(EncodedBytes(e, g.size()), '\0');
      EncodeValues(e, g, threshold, residual.data(), bytes.data());
      const absl::Span<const char> chunk(bytes);
      std::vector<float> decoded(g.size());
      ASSERT_TRUE(DecodeValues(e, ByteChunks(&chunk, 1), threshold, absl::MakeSpan(decoded)).ok());
      ASSERT_TRUE(plain.Push(rank, {0, 0}, 0, decoded, &plain_sink).ok());
      ASSERT_TRUE(compressed
                      .Push(PartHeader{{0, 0}, 0, rank, 0, e, threshold}, ByteChunks(&chunk, 1),
                            &compressed_sink)
                      .ok());
    }
    ASSERT_EQ(compressed_sink.values.size(), 2u) << WireEncodingName(e);
    EXPECT_EQ(compressed_sink.values, plain_sink.values) << WireEncodingName(e);
    const std::string short_bytes(EncodedBytes(e, 9) - 1, '\0');
    const absl::Span<const char> short_chunk(short_bytes);
    EXPECT_EQ(compressed.Push(PartHeader{{0, 0}, 1, 0, 0, e, 0.5f}, ByteChunks(&short_chunk, 1),
                              &compressed_sink)
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// fp16's range ends at 65504: an overflowed gradient is refused, and the refusal says why.
TEST(ShardCoreTest, OverflowedFp16PushIsRefusedNamingTheCompression) {
  ShardCore core(0);
  ASSERT_TRUE(core.Configure(Config(1, KVStoreMode::kDistSync)).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>(2, 1.0f)).ok());
  const std::vector<float> g = {1.0f, 1e5f};
  std::string bytes(4, '\0');
  EncodeValues(WireEncoding::kF16, g, 0, nullptr, bytes.data());
  const absl::Span<const char> chunk(bytes);
  RecordingSink sink;
  const absl::Status s =
      core.Push(PartHeader{{0, 0}, 0, 0, 0, WireEncoding::kF16}, ByteChunks(&chunk, 1), &sink);
  EXPECT_TRUE(absl::StrContains(s.message(), "values beyond 65504 overflow")) << s;
}

TEST(ShardCoreTest, AsyncAppliesEachPushAtOnceScaledByOneOverW) {
  ShardCore core(0);
  ShardConfig config = Config(2, KVStoreMode::kDistAsync);
  config.optimizer.optimizer_options = {};
  config.optimizer.lr_schedule.kind = LrScheduleKind::kConstant;
  ASSERT_TRUE(core.Configure(config).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>{1, 1}).ok());
  RecordingSink a, b;
  ASSERT_TRUE(core.Push(1, {0, 0}, 0, std::vector<float>{2, 4}, &a).ok());
  ASSERT_EQ(a.values.size(), 1u);
  EXPECT_EQ(a.values[0], (std::vector<float>{0.5f, 0.0f}));  // 1 - 0.5 × g/2
  EXPECT_TRUE(b.values.empty());
  ASSERT_TRUE(core.Push(0, {0, 0}, 0, std::vector<float>{2, 4}, &b).ok());
  EXPECT_EQ(b.values[0], (std::vector<float>{0.0f, -1.0f}));
  EXPECT_EQ(b.versions[0], 2);
  // Stale pushes are accepted; one computed on a version not reached yet is refused.
  EXPECT_TRUE(core.Push(1, {0, 0}, 1, std::vector<float>{0, 0}, &a).ok());
  EXPECT_EQ(core.Push(1, {0, 0}, 9, std::vector<float>{2, 4}, &a).message(),
            "shard 0: worker 1's push of key 0 part 0 was computed on version 9, which the part "
            "has not reached (3)");
  std::vector<float> read;
  EXPECT_EQ(*core.Read({0, 0}, &read), 3);
  EXPECT_EQ(read, (std::vector<float>{0.0f, -1.0f}));
}

// A push may carry its learning rate (a script's own LR scheduler): dist_sync's update runs at
// it in place of the schedule's, 0 included; pushes of one version that ask for different
// rates are refused; a negative one is the schedule's. dist_async applies each push at its own.
TEST(ShardCoreTest, PushesCarryingALearningRateUpdateAtItInPlaceOfTheSchedule) {
  const size_t n = 3;
  ShardCore core(0);
  ASSERT_TRUE(core.Configure(Config(2, KVStoreMode::kDistSync)).ok());
  std::vector<float> weights = {1, -2, 3};
  ASSERT_TRUE(core.AddPart({4, 0}, weights).ok());
  auto sgd = *MakeOptimizer("sgd", {0.9, 0.01});
  auto schedule = *LrSchedule::Create(Config(2, KVStoreMode::kDistSync).optimizer.lr_schedule);
  const auto push = [&](int rank, int64_t version, float lr, RecordingSink* sink) {
    const std::vector<float> g = Gradient(rank, static_cast<int>(version), n);
    const absl::Span<const char> bytes(reinterpret_cast<const char*>(g.data()),
                                       g.size() * sizeof(float));
    return core.Push(PartHeader{{4, 0}, version, rank, 0, WireEncoding::kF32, 0, lr},
                     ByteChunks(&bytes, 1), sink);
  };
  RecordingSink sinks[2];
  const float rates[] = {0.125f, -1.0f, 0.0f, 3.0f};  // -1: the schedule's
  for (int step = 0; step < 4; ++step) {
    std::vector<float> mean = Gradient(0, step, n);
    const std::vector<float> g1 = Gradient(1, step, n);
    for (size_t i = 0; i < n; ++i) mean[i] = (mean[i] + g1[i]) * 0.5f;
    sgd->Update(0, absl::MakeSpan(weights), mean,
                rates[step] >= 0 ? rates[step] : static_cast<float>(schedule.At(step)));
    ASSERT_TRUE(push(1, step, rates[step], &sinks[1]).ok());
    ASSERT_TRUE(push(0, step, rates[step], &sinks[0]).ok());
    EXPECT_EQ(sinks[0].values.back(), weights) << "step " << step;
  }
  ASSERT_TRUE(push(0, 4, 0.5f, &sinks[0]).ok());
  EXPECT_EQ(push(1, 4, -1, &sinks[1]).message(),
            "shard 0: worker 1's push of key 4 part 0 asks for the schedule's learning rate but 1 "
            "push(es) of version 4 before it asked for learning rate 0.5: every worker sets the "
            "same rate at the same step");

  ShardCore async(0);
  ShardConfig config = Config(2, KVStoreMode::kDistAsync);
  config.optimizer.optimizer_options = {};
  ASSERT_TRUE(async.Configure(config).ok());
  ASSERT_TRUE(async.AddPart({0, 0}, std::vector<float>{1}).ok());
  const std::vector<float> two = {2};
  const absl::Span<const char> bytes(reinterpret_cast<const char*>(two.data()), sizeof(float));
  RecordingSink sink;
  ASSERT_TRUE(async.Push(PartHeader{{0, 0}, 0, 1, 0, WireEncoding::kF32, 0, 0.25f},
                         ByteChunks(&bytes, 1), &sink).ok());
  EXPECT_EQ(sink.values.back(), std::vector<float>{0.75f});  // 1 - 0.25 × 2/2
}

// W pushes make one step of the schedule: a schedule that ends after 2 steps still updates at
// the 4th push of a 2-worker job, and at the 5th the rate has reached its end (0 for cosine).
TEST(ShardCoreTest, AsyncScheduleAdvancesOneStepPerWPushes) {
  ShardCore core(0);
  ShardConfig config = Config(2, KVStoreMode::kDistAsync);
  config.optimizer.optimizer_options = {};
  config.optimizer.lr_schedule.kind = LrScheduleKind::kCosine;
  config.optimizer.lr_schedule.base_lr = 1;
  config.optimizer.lr_schedule.epochs = 1;
  config.optimizer.lr_schedule.steps_per_epoch = 2;
  ASSERT_TRUE(core.Configure(config).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>{0}).ok());
  auto schedule = *LrSchedule::Create(config.optimizer.lr_schedule);
  RecordingSink sink;
  float expected = 0;
  for (int push = 0; push < 5; ++push) {
    ASSERT_TRUE(core.Push(push % 2, {0, 0}, push, std::vector<float>{2}, &sink).ok());
    expected -= static_cast<float>(schedule.At(push / 2)) * (2.0f / 2);
    EXPECT_EQ(sink.values.back()[0], expected) << "push " << push;
  }
  EXPECT_GT(schedule.At(1), 0.0);
}

// A sink that keeps reading the values it was sent (as a reply still in gRPC's hands does).
class PinningSink final : public PartSink {
 public:
  ~PinningSink() override {
    for (PinCount* pin : pins) pin->Unpin();
  }
  void Send(PartId, int64_t, absl::Span<const float> value, PinCount* pin) override {
    pin->Pin();
    pins.push_back(pin);
    held.push_back(value);
  }
  std::vector<PinCount*> pins;
  std::vector<absl::Span<const float>> held;
};

// An update never waits for replies that still read the old value: they keep it, unchanged.
TEST(ShardCoreTest, UpdatesDoNotDisturbValuesRepliesStillRead) {
  ShardCore core(0);
  ShardConfig config = Config(1, KVStoreMode::kDistSync);
  config.optimizer.optimizer_options = {};
  config.optimizer.lr_schedule.kind = LrScheduleKind::kConstant;
  config.optimizer.lr_schedule.base_lr = 1;
  ASSERT_TRUE(core.Configure(config).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>{10, 20}).ok());
  PinningSink sink;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(core.Push(0, {0, 0}, step, std::vector<float>{1, 2}, &sink).ok());
  }
  ASSERT_EQ(sink.held.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(std::vector<float>(sink.held[step].begin(), sink.held[step].end()),
              (std::vector<float>{9.0f - step, 18.0f - 2 * step}))
        << "the reply of step " << step;
  }
}

TEST(ShardCoreTest, DetachedSinkGetsNoAnswer) {
  ShardCore core(0);
  ASSERT_TRUE(core.Configure(Config(2, KVStoreMode::kDistSync)).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>{1}).ok());
  RecordingSink gone, stays;
  ASSERT_TRUE(core.Push(0, {0, 0}, 0, std::vector<float>{1}, &gone).ok());
  core.Detach(&gone);
  ASSERT_TRUE(core.Push(1, {0, 0}, 0, std::vector<float>{1}, &stays).ok());
  EXPECT_TRUE(gone.values.empty());
  EXPECT_EQ(stays.values.size(), 1u);
}

double HistogramCount(ProcessMetrics& process, const std::string& name) {
  const auto series = FindSeries(process, name);
  return series.has_value() ? series->histogram.sample_count : -1;
}

TEST(ShardCoreTest, MetricsCountUpdatesWaitsAndRefusalsByReason) {
  ProcessMetrics process("job-m", "shard", 0);
  ShardMetrics metrics(process);
  ShardCore core(0);
  core.set_metrics(&metrics);
  ASSERT_TRUE(core.Configure(Config(2, KVStoreMode::kDistSync)).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>(4, 1.0f)).ok());
  RecordingSink a, b;
  ASSERT_TRUE(core.Push(0, {0, 0}, 0, std::vector<float>(4, 0.5f), &a).ok());
  EXPECT_EQ(metrics.pulls_waiting.Value(), 1);
  EXPECT_FALSE(core.Push(0, {0, 0}, 0, std::vector<float>(4, 0.5f), &a).ok());  // duplicate
  EXPECT_FALSE(core.Push(1, {0, 0}, 0, std::vector<float>(3, 0.5f), &b).ok());  // wrong size
  EXPECT_FALSE(core.Push(1, {9, 0}, 0, std::vector<float>(4, 0.5f), &b).ok());  // unknown part
  EXPECT_FALSE(core.Push(1, {0, 0}, 1, std::vector<float>(4, 0.5f), &b).ok());  // future
  EXPECT_FALSE(core.Push(5, {0, 0}, 0, std::vector<float>(4, 0.5f), &b).ok());  // rank
  ASSERT_TRUE(core.Push(1, {0, 0}, 0, std::vector<float>(4, 0.5f), &b).ok());
  EXPECT_FALSE(core.Push(1, {0, 0}, 0, std::vector<float>(4, 0.5f), &b).ok());  // stale
  EXPECT_EQ(metrics.pulls_waiting.Value(), 0);
  EXPECT_EQ(metrics.pushes_applied.Value(), 2);
  EXPECT_EQ(metrics.parameter_version.Value(), 1);
  EXPECT_EQ(HistogramCount(process, "cohort_shard_optimizer_apply_seconds"), 1);
  const auto rejected = [&](Rejection r) {
    return metrics.rejected[static_cast<int>(r)]->Value();
  };
  EXPECT_EQ(rejected(Rejection::kDuplicate), 1);
  EXPECT_EQ(rejected(Rejection::kWrongSize), 1);
  EXPECT_EQ(rejected(Rejection::kUnknownPart), 1);
  EXPECT_EQ(rejected(Rejection::kFutureVersion), 1);
  EXPECT_EQ(rejected(Rejection::kWrongRank), 1);
  EXPECT_EQ(rejected(Rejection::kStaleVersion), 1);
  EXPECT_EQ(rejected(Rejection::kNotReady), 0);
}


// An auxiliary key (batch-norm running statistics) has no optimizer: dist_sync's new value is
// the version's pushes summed in rank order times 1/W, bitwise as a process averages its
// replicas, whatever the arrival order; it is checkpointed and resumed with no optimizer state.
TEST(ShardCoreTest, AuxiliarySyncValueIsTheRankOrderMeanOfThePushes) {
  const int workers = 3;
  ShardConfig config = Config(workers, KVStoreMode::kDistSync, /*parts=*/2);
  config.auxiliary_keys = {9};
  MemoryCheckpoints checkpoints;
  ShardCore core;
  core.set_checkpoints(1, &checkpoints);
  ASSERT_TRUE(core.Configure(config).ok());
  ASSERT_TRUE(core.AddPart({9, 0}, std::vector<float>{0, 1, 0, 1}).ok());
  ASSERT_TRUE(core.AddPart({3, 0}, std::vector<float>{0, 1, 0, 1}).ok());
  std::vector<RecordingSink> sinks(workers);
  for (int r : {2, 0, 1}) ASSERT_TRUE(core.Push(r, {9, 0}, 0, Gradient(r, 0, 4), &sinks[r]).ok());
  std::vector<float> want = Gradient(0, 0, 4);
  for (int r = 1; r < workers; ++r) {
    const std::vector<float> g = Gradient(r, 0, 4);
    for (size_t i = 0; i < want.size(); ++i) want[i] += g[i];
  }
  for (float& w : want) w *= 1.0f / workers;
  for (int r = 0; r < workers; ++r) {
    ASSERT_EQ(sinks[r].values.size(), 1u);
    EXPECT_EQ(sinks[r].versions[0], 1);
    EXPECT_EQ(sinks[r].values[0], want) << "rank " << r;
  }
  // The parameter beside it still takes the optimizer's step.
  for (int r = 0; r < workers; ++r) {
    ASSERT_TRUE(core.Push(r, {3, 0}, 0, Gradient(r, 0, 4), &sinks[r]).ok());
  }
  EXPECT_NE(sinks[0].values.back(), want);

  ASSERT_EQ(checkpoints.steps.count(1), 1u);
  const ShardCheckpoint& at1 = checkpoints.steps.at(1);
  ShardCore resumed;
  resumed.ResumeFrom(at1);
  ASSERT_TRUE(resumed.Configure(config).ok());
  ASSERT_TRUE(resumed.AddPart({9, 0}, std::vector<float>{0, 1, 0, 1}).ok());
  ASSERT_TRUE(resumed.AddPart({3, 0}, std::vector<float>{0, 1, 0, 1}).ok());
  std::vector<float> value;
  EXPECT_EQ(*resumed.Read({9, 0}, &value), 1);
  EXPECT_EQ(value, want);
}

// dist_async: each push replaces its worker's contribution and the value is the mean of every
// worker's latest (the part's initial value for a worker that has not pushed yet).
TEST(ShardCoreTest, AuxiliaryAsyncValueIsTheMeanOfEachWorkersLatestPush) {
  ShardConfig config = Config(2, KVStoreMode::kDistAsync);
  config.auxiliary_keys = {0};
  ShardCore core;
  ASSERT_TRUE(core.Configure(config).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>{2, 4}).ok());
  RecordingSink sink;
  ASSERT_TRUE(core.Push(1, {0, 0}, 0, std::vector<float>{4, 8}, &sink).ok());
  EXPECT_EQ(sink.values.back(), (std::vector<float>{3, 6}));
  ASSERT_TRUE(core.Push(1, {0, 0}, 1, std::vector<float>{6, 0}, &sink).ok());
  EXPECT_EQ(sink.values.back(), (std::vector<float>{4, 2}));
  ASSERT_TRUE(core.Push(0, {0, 0}, 2, std::vector<float>{0, 0}, &sink).ok());
  EXPECT_EQ(sink.values.back(), (std::vector<float>{3, 0}));
  EXPECT_EQ(sink.versions.back(), 3);
}

}  // namespace
}  // namespace cohort
