#include "trainer/data/prefetch.h"

#include "trainer/base/check.h"

namespace cohort {

BatchPrefetcher::BatchPrefetcher(SampleSource* source, const PrefetchOptions& options)
    : source_(source),
      options_(options),
      sampler_(options.partition != nullptr ? *options.partition
                                            : DataPartition{source->size(), {}},
               options.seed, options.rank, options.num_workers, options.batch_size),
      steps_per_epoch_(sampler_.steps_per_epoch()),
      total_((options.end_epoch - options.first_epoch) * steps_per_epoch_ - options.first_step) {
  COHORT_CHECK(options.depth >= 1, "prefetch depth %d", options.depth);
  COHORT_CHECK(options.first_epoch >= 0 && options.end_epoch >= options.first_epoch,
               "epochs [%ld, %ld)", options.first_epoch, options.end_epoch);
  COHORT_CHECK(options.first_step >= 0 && options.first_step <= steps_per_epoch_,
               "first step %ld of %ld per epoch", options.first_step, steps_per_epoch_);
  COHORT_CHECK(total_ >= 0, "first step %ld of an empty epoch range", options.first_step);
  const Shape& s = source->sample_shape();
  ring_.resize(static_cast<size_t>(options.depth));
  for (Batch& b : ring_) {
    b.images = Tensor(Shape{options.batch_size, s[0], s[1], s[2]}, DType::kF32, options.allocator);
    b.labels = Tensor(Shape{options.batch_size}, DType::kI32, options.allocator);
  }
  producer_ = std::thread([this] { Produce(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  producer_.join();
}

int64_t BatchPrefetcher::remaining() const {
  absl::MutexLock lock(&mu_);
  return total_ - consumed_;
}

bool BatchPrefetcher::CanFill() const { return stop_ || produced_ - released_ < options_.depth; }

bool BatchPrefetcher::NextReady() const { return produced_ > consumed_ || !failed_.ok(); }

absl::StatusOr<const Batch*> BatchPrefetcher::Next() {
  absl::MutexLock lock(&mu_);
  COHORT_CHECK(consumed_ < total_, "all %ld batches were taken", total_);
  released_ = consumed_;
  mu_.Await(absl::Condition(this, &BatchPrefetcher::NextReady));
  if (produced_ == consumed_) return failed_;
  return &ring_[static_cast<size_t>(consumed_++ % options_.depth)];
}

void BatchPrefetcher::Produce() {
  int64_t k = 0;  // the batch being assembled
  for (int64_t epoch = options_.first_epoch; epoch < options_.end_epoch; ++epoch) {
    sampler_.SetEpoch(epoch);  // allocates its permutation: once per epoch, not per step
    const EpochKeys keys{options_.seed, epoch};
    for (int64_t step = epoch == options_.first_epoch ? options_.first_step : 0;
         step < steps_per_epoch_; ++step, ++k) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &BatchPrefetcher::CanFill));
        if (stop_) return;
      }
      Batch& b = ring_[static_cast<size_t>(k % options_.depth)];
      b.epoch = epoch;
      b.step = step;
      const absl::Status gathered = source_->Gather(sampler_.Batch(step), &keys, &b.images, &b.labels);
      absl::MutexLock lock(&mu_);
      if (!gathered.ok()) {
        failed_ = gathered;
        return;
      }
      produced_ = k + 1;
    }
  }
}

}  // namespace cohort
