#include "trainer/data/prefetch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "trainer/data/sampler.h"
#include "trainer/data/synthetic.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

constexpr Augmentation kAugmentation{2, true};

PrefetchOptions Options(int depth) {
  PrefetchOptions o;
  o.seed = 11;
  o.rank = 1;
  o.num_workers = 2;
  o.batch_size = 8;
  o.depth = depth;
  return o;
}

// Checks the prefetcher's batches against GatherBatch on the Sampler's indices, one by one,
// from (o.first_epoch, o.first_step) to the end of o.end_epoch − 1.
void ExpectSynchronousSequence(const ImageDataset& d, const Normalization& norm,
                               const PrefetchOptions& o) {
  InMemorySource source(d, norm, kAugmentation);
  BatchPrefetcher prefetcher(&source, o);
  Sampler sampler(d.size(), o.seed, o.rank, o.num_workers, o.batch_size);
  ASSERT_EQ(prefetcher.steps_per_epoch(), sampler.steps_per_epoch());
  Tensor images, labels(Shape{0}, DType::kI32);
  std::set<const void*> buffers;
  int64_t count = 0;
  for (int64_t epoch = o.first_epoch; epoch < o.end_epoch; ++epoch) {
    sampler.SetEpoch(epoch);
    for (int64_t s = epoch == o.first_epoch ? o.first_step : 0; s < sampler.steps_per_epoch();
         ++s, ++count) {
      const Batch& b = **prefetcher.Next();
      // Give the producer time to run ahead: it must not touch the batch the consumer holds.
      if (s % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      GatherBatch(d, sampler.Batch(s), norm, EpochAugmentation{kAugmentation, o.seed, epoch},
                  &images, &labels);
      ASSERT_EQ(b.epoch, epoch);
      ASSERT_EQ(b.step, s);
      ASSERT_TRUE(SameBits(b.images, images)) << "epoch " << epoch << " step " << s;
      ASSERT_TRUE(SameBits(b.labels, labels)) << "epoch " << epoch << " step " << s;
      buffers.insert(b.images.raw());
    }
  }
  EXPECT_GT(count, 0);
  EXPECT_EQ(prefetcher.remaining(), 0);
  // The ring's buffers, allocated once and reused.
  EXPECT_EQ(buffers.size(), static_cast<size_t>(std::min<int64_t>(o.depth, count)));
}

TEST(PrefetchTest, EqualsSynchronousGatheringOverTwoEpochs) {
  const ImageDataset d = MakeSyntheticDataset(Shape{3, 8, 8}, 10, 203, 5, "d");
  const Normalization norm = ComputeNormalization(d);
  for (int depth : {1, 2, 3}) {
    SCOPED_TRACE(depth);
    PrefetchOptions o = Options(depth);
    o.end_epoch = 2;
    ExpectSynchronousSequence(d, norm, o);
  }
}

TEST(PrefetchTest, StartsAtAnyEpochAndStep) {
  const ImageDataset d = MakeSyntheticDataset(Shape{1, 6, 6}, 4, 100, 6, "d");
  const Normalization norm = ComputeNormalization(d);
  PrefetchOptions o = Options(2);
  o.first_epoch = 3;
  o.end_epoch = 5;
  ExpectSynchronousSequence(d, norm, o);
  o.first_step = 4;
  ExpectSynchronousSequence(d, norm, o);

  InMemorySource source(d, norm, kAugmentation);
  BatchPrefetcher prefetcher(&source, o);
  EXPECT_EQ(prefetcher.remaining(), 2 * prefetcher.steps_per_epoch() - 4);
  const Batch& first = **prefetcher.Next();
  EXPECT_EQ(first.epoch, 3);
  EXPECT_EQ(first.step, 4);
}

// Host memory that remembers what it handed out (as a GPU backend's pinned allocator would).
class RecordingAllocator final : public Allocator {
 public:
  Device device() const override { return Device::Cpu(); }
  void* Allocate(size_t bytes) override {
    void* p = CpuAllocator()->Allocate(bytes);
    absl::MutexLock lock(&mu_);
    handed_out_.insert(p);
    return p;
  }
  void Free(void* ptr) override { CpuAllocator()->Free(ptr); }
  bool HandedOut(const void* p) {
    absl::MutexLock lock(&mu_);
    return handed_out_.count(p) > 0;
  }

 private:
  absl::Mutex mu_;
  std::set<const void*> handed_out_ ABSL_GUARDED_BY(mu_);
};

// The batches are assembled in the allocator's memory (pinned, for a GPU to upload from).
TEST(PrefetchTest, BatchesLiveInTheGivenAllocatorsMemory) {
  const ImageDataset d = MakeSyntheticDataset(Shape{1, 6, 6}, 4, 100, 6, "d");
  RecordingAllocator pinned;
  PrefetchOptions o = Options(2);
  o.allocator = &pinned;
  o.end_epoch = 1;
  ExpectSynchronousSequence(d, ComputeNormalization(d), o);
  InMemorySource source(d, ComputeNormalization(d), kAugmentation);
  BatchPrefetcher prefetcher(&source, o);
  for (int i = 0; i < 3; ++i) {
    const Batch& b = **prefetcher.Next();
    EXPECT_TRUE(pinned.HandedOut(b.images.raw())) << i;
    EXPECT_TRUE(pinned.HandedOut(b.labels.raw())) << i;
  }
}

TEST(PrefetchTest, EmptyRangeProducesNothing) {
  const ImageDataset d = MakeSyntheticDataset(Shape{1, 2, 2}, 2, 10, 1, "d");
  PrefetchOptions o = Options(2);
  o.first_epoch = 2;
  o.end_epoch = 2;
  InMemorySource source(d, Normalization{}, kAugmentation);
  BatchPrefetcher prefetcher(&source, o);
  EXPECT_EQ(prefetcher.remaining(), 0);
}

TEST(PrefetchTest, DestructionMidEpochIsPrompt) {
  // Batches of 64 × 3×64×64: the producer fills the ring and blocks on it.
  const ImageDataset d = MakeSyntheticDataset(Shape{3, 64, 64}, 10, 2048, 7, "d");
  InMemorySource source(d, ComputeNormalization(d), kAugmentation);
  for (int taken : {0, 1, 5}) {
    PrefetchOptions o = Options(2);
    o.batch_size = 64;
    o.end_epoch = 1000;
    auto prefetcher = std::make_unique<BatchPrefetcher>(&source, o);
    for (int i = 0; i < taken; ++i) ASSERT_TRUE(prefetcher->Next().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto start = Clock::now();
    prefetcher.reset();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 0.5) << taken;
  }
}

// A source that fails at one sample: the batches before it arrive, then its error, every time.
class FailingSource final : public SampleSource {
 public:
  FailingSource(const ImageDataset& d, int64_t bad) : memory_(d, Normalization{}, {}), bad_(bad) {}
  std::string name() const override { return "failing"; }
  int64_t size() const override { return memory_.size(); }
  const Shape& sample_shape() const override { return memory_.sample_shape(); }
  int num_classes() const override { return memory_.num_classes(); }
  ChannelNormalization normalization() const override { return memory_.normalization(); }
  absl::Status Gather(absl::Span<const int64_t> indices, const EpochKeys* train, Tensor* images,
                      Tensor* labels) override {
    for (const int64_t i : indices) {
      if (i == bad_) return absl::DataLossError("sample " + std::to_string(i) + " is damaged");
    }
    return memory_.Gather(indices, train, images, labels);
  }

 private:
  InMemorySource memory_;
  const int64_t bad_;
};

TEST(PrefetchTest, AFailedGatherEndsTheBatchesWithItsError) {
  const ImageDataset d = MakeSyntheticDataset(Shape{1, 2, 2}, 2, 64, 1, "d");
  PrefetchOptions o = Options(3);
  o.end_epoch = 2;
  Sampler sampler(d.size(), o.seed, o.rank, o.num_workers, o.batch_size);
  sampler.SetEpoch(1);
  const int64_t bad = sampler.Batch(2)[0];  // in epoch 1, step 2 (and perhaps before)
  int64_t before = 0;  // the batches before the first that holds it
  for (int64_t epoch = 0, found = 0; epoch < 2 && !found; ++epoch) {
    sampler.SetEpoch(epoch);
    for (int64_t step = 0; step < sampler.steps_per_epoch() && !found; ++step) {
      const auto batch = sampler.Batch(step);
      found = std::find(batch.begin(), batch.end(), bad) != batch.end();
      before += !found;
    }
  }
  FailingSource source(d, bad);
  BatchPrefetcher prefetcher(&source, o);
  int64_t good = 0;
  absl::Status failed;
  while (prefetcher.remaining() > 0) {
    absl::StatusOr<const Batch*> b = prefetcher.Next();
    if (!b.ok()) {
      failed = b.status();
      break;
    }
    ++good;
  }
  EXPECT_EQ(good, before);
  EXPECT_NE(failed.message().find("sample " + std::to_string(bad) + " is damaged"),
            std::string::npos) << failed;
  EXPECT_EQ(prefetcher.Next().status(), failed);
}

}  // namespace
}  // namespace cohort
