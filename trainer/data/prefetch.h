#ifndef COHORT_TRAINER_DATA_PREFETCH_H_
#define COHORT_TRAINER_DATA_PREFETCH_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/data/sample_source.h"
#include "trainer/data/sampler.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// One rank's training batch for one step.
struct Batch {
  int64_t epoch = 0;
  int64_t step = 0;  // within the epoch, from 0
  Tensor images;     // (B, C, H, W) F32, augmented and normalised
  Tensor labels{Shape{0}, DType::kI32};  // (B) I32
};

struct PrefetchOptions {
  // The Sampler's parameters (sampler.h); batch_size is per worker.
  uint64_t seed = 0;
  int rank = 0;
  int num_workers = 1;
  int64_t batch_size = 1;
  const DataPartition* partition = nullptr;  // null: by samples over the source's
  // The batches to produce: from step first_step of first_epoch (a resumed job starts anywhere)
  // to the last step of epoch end_epoch − 1.
  int64_t first_epoch = 0;
  int64_t first_step = 0;
  int64_t end_epoch = 1;
  // Batch buffers in the ring: the one the consumer holds and depth − 1 assembled ahead.
  int depth = 2;
  // Where they live: pinned host memory, for a GPU to upload from without a staging copy.
  Allocator* allocator = CpuAllocator();
};

// Assembles one rank's training batches on a background thread, exactly as the source's Gather
// does for Sampler's indices, so the training loop never waits for data when assembling a batch
// is faster than a step. The buffers are allocated once, in the constructor. Next is for one
// consumer thread; the destructor stops the producer wherever it is.
class BatchPrefetcher {
 public:
  // source (and options.partition) must outlive the prefetcher. Starts producing at once.
  BatchPrefetcher(SampleSource* source, const PrefetchOptions& options);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // Batches Next has still to return.
  int64_t remaining() const;

  // The next batch in (epoch, step) order, waiting for it if need be; remaining() must be > 0.
  // The batch stays valid until the next call to Next (which hands its buffers back to the
  // producer) or the destructor. Once gathering a batch failed, its error, from then on.
  absl::StatusOr<const Batch*> Next();

 private:
  void Produce();
  bool CanFill() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NextReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SampleSource* const source_;
  const PrefetchOptions options_;
  Sampler sampler_;  // the producer's once it runs
  const int64_t steps_per_epoch_;
  const int64_t total_;  // batches to produce

  // Batch k lives in ring_[k % depth]. A slot belongs to the producer from its release until
  // produced_ passes it, then to the consumer until released_ passes it: mu_ orders the handovers.
  std::vector<Batch> ring_;

  mutable absl::Mutex mu_;
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;  // batches assembled
  int64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;  // batches returned by Next
  int64_t released_ ABSL_GUARDED_BY(mu_) = 0;  // batches whose slots are free again
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // the producer stopped at a batch it could not gather

  std::thread producer_;  // last: starts after everything above is set up
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_PREFETCH_H_
