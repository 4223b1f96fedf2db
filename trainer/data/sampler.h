#ifndef COHORT_TRAINER_DATA_SAMPLER_H_
#define COHORT_TRAINER_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace cohort {

// The permutation of [0, n) for an epoch, a function of (seed, epoch) alone.
std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n);

// Which samples each rank reads. By default (no files given) the Contracts' "Sampler": step s
// of an epoch covers perm[s·W·b, (s+1)·W·b) of one permutation of [0, n) and rank r takes
// [r·b, (r+1)·b) of it, so a single process with batch W·b sees the same samples in the same
// order. By files (records_per_file given: the dataset's indices run through file 0's records,
// then file 1's, ...), rank r reads only the files f with f mod W = r, its records in an order
// drawn from (seed, epoch, rank): a host needs only its ranks' files.
struct DataPartition {
  int64_t size = 0;
  std::vector<int64_t> records_per_file;  // empty: by samples

  bool by_files() const { return !records_per_file.empty(); }
  // Every rank runs the same number of steps: floor(n / (W·b)) by samples, the smallest
  // rank's floor(n_r / b) by files (the rest of each share is dropped, a different rest each
  // epoch).
  int64_t StepsPerEpoch(int num_workers, int64_t batch) const;
  // The files rank r of W reads (by files).
  std::vector<int> FilesOf(int rank, int num_workers) const;
};

// One rank's sample indices, step by step, as its DataPartition says. Not thread-safe.
class Sampler {
 public:
  Sampler(const DataPartition& partition, uint64_t seed, int rank, int num_workers,
          int64_t batch);
  // By samples over [0, n).
  Sampler(int64_t n, uint64_t seed, int rank, int num_workers, int64_t batch)
      : Sampler(DataPartition{n, {}}, seed, rank, num_workers, batch) {}

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  void SetEpoch(int64_t epoch);
  // The rank's sample indices for a step of the current epoch (batch of them).
  absl::Span<const int64_t> Batch(int64_t step) const;

 private:
  const int64_t n_;
  const uint64_t seed_;
  const int rank_;
  const int num_workers_;
  const int64_t batch_;
  const int64_t steps_per_epoch_;
  const bool by_files_;
  std::vector<int64_t> own_;  // by files: the rank's records
  std::vector<int64_t> perm_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_SAMPLER_H_
