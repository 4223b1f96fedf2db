#ifndef COHORT_TRAINER_DATA_SAMPLER_H_
#define COHORT_TRAINER_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace cohort {

// The permutation of [0, n) for an epoch, a function of (seed, epoch) alone.
std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n);

// The data partition of one rank (Contracts, "Sampler"): step s of an epoch covers
// perm[s·W·b, (s+1)·W·b) and rank r takes [r·b, (r+1)·b) of it. Every rank runs
// floor(n / (W·b)) steps; the remainder is dropped (a different one each epoch). A single
// process with batch W·b sees the same samples in the same order. Not thread-safe.
class Sampler {
 public:
  Sampler(int64_t n, uint64_t seed, int rank, int num_workers, int64_t batch);

  int64_t steps_per_epoch() const { return n_ / (num_workers_ * batch_); }
  void SetEpoch(int64_t epoch);
  // The rank's sample indices for a step of the current epoch (batch of them).
  absl::Span<const int64_t> Batch(int64_t step) const;

 private:
  int64_t n_;
  uint64_t seed_;
  int rank_;
  int num_workers_;
  int64_t batch_;
  std::vector<int64_t> perm_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_SAMPLER_H_
