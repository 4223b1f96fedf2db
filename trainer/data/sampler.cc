#include "trainer/data/sampler.h"

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

Sampler::Sampler(int64_t n, uint64_t seed, int rank, int num_workers, int64_t batch)
    : n_(n), seed_(seed), rank_(rank), num_workers_(num_workers), batch_(batch) {
  COHORT_CHECK(num_workers > 0 && rank >= 0 && rank < num_workers && batch > 0,
               "rank %d of %d workers, batch %ld", rank, num_workers, batch);
  SetEpoch(0);
}

void Sampler::SetEpoch(int64_t epoch) { perm_ = EpochPermutation(seed_, epoch, n_); }

absl::Span<const int64_t> Sampler::Batch(int64_t step) const {
  COHORT_CHECK(step >= 0 && step < steps_per_epoch(), "step %ld of %ld", step, steps_per_epoch());
  const int64_t start = step * num_workers_ * batch_ + rank_ * batch_;
  return absl::MakeConstSpan(perm_).subspan(static_cast<size_t>(start), static_cast<size_t>(batch_));
}

}  // namespace cohort
