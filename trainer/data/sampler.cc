#include "trainer/data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "trainer/base/check.h"
#include "trainer/base/random.h"

namespace cohort {

std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  // Fisher–Yates with our own generator: std::shuffle's result differs between libraries.
  Rng rng(MixKeys({seed, static_cast<uint64_t>(epoch), 0x5a3d1e}));
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(perm[i], perm[rng.Below(static_cast<uint64_t>(i) + 1)]);
  }
  return perm;
}

int64_t DataPartition::StepsPerEpoch(int num_workers, int64_t batch) const {
  if (!by_files()) return size / (num_workers * batch);
  int64_t fewest = -1;
  for (int r = 0; r < num_workers; ++r) {
    int64_t n = 0;
    for (const int f : FilesOf(r, num_workers)) n += records_per_file[static_cast<size_t>(f)];
    fewest = fewest < 0 ? n : std::min(fewest, n);
  }
  return fewest / batch;
}

std::vector<int> DataPartition::FilesOf(int rank, int num_workers) const {
  std::vector<int> files;
  for (int f = rank; f < static_cast<int>(records_per_file.size()); f += num_workers) {
    files.push_back(f);
  }
  return files;
}

Sampler::Sampler(const DataPartition& partition, uint64_t seed, int rank, int num_workers,
                 int64_t batch)
    : n_(partition.size),
      seed_(seed),
      rank_(rank),
      num_workers_(num_workers),
      batch_(batch),
      steps_per_epoch_(partition.StepsPerEpoch(num_workers, batch)),
      by_files_(partition.by_files()) {
  COHORT_CHECK(num_workers > 0 && rank >= 0 && rank < num_workers && batch > 0,
               "rank %d of %d workers, batch %ld", rank, num_workers, batch);
  if (partition.by_files()) {
    std::vector<int64_t> first(partition.records_per_file.size() + 1, 0);
    for (size_t f = 0; f < partition.records_per_file.size(); ++f) {
      first[f + 1] = first[f] + partition.records_per_file[f];
    }
    COHORT_CHECK(first.back() == n_, "%ld records in the files of %ld", first.back(), n_);
    for (const int f : partition.FilesOf(rank, num_workers)) {
      for (int64_t i = first[static_cast<size_t>(f)]; i < first[static_cast<size_t>(f) + 1]; ++i) {
        own_.push_back(i);
      }
    }
  }
  SetEpoch(0);
}

void Sampler::SetEpoch(int64_t epoch) {
  if (!by_files_) {
    perm_ = EpochPermutation(seed_, epoch, n_);
    return;
  }
  // Each rank's own order: keyed by rank too, as no two ranks share a record.
  const std::vector<int64_t> order = EpochPermutation(
      MixKeys({seed_, static_cast<uint64_t>(rank_), 0x6f11e5}), epoch,
      static_cast<int64_t>(own_.size()));
  perm_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) perm_[i] = own_[static_cast<size_t>(order[i])];
}

absl::Span<const int64_t> Sampler::Batch(int64_t step) const {
  COHORT_CHECK(step >= 0 && step < steps_per_epoch(), "step %ld of %ld", step, steps_per_epoch());
  const int64_t start = by_files_ ? step * batch_ : step * num_workers_ * batch_ + rank_ * batch_;
  return absl::MakeConstSpan(perm_).subspan(static_cast<size_t>(start), static_cast<size_t>(batch_));
}

}  // namespace cohort
