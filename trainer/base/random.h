#ifndef COHORT_TRAINER_BASE_RANDOM_H_
#define COHORT_TRAINER_BASE_RANDOM_H_

#include <cstdint>
#include <initializer_list>
#include "absl/strings/string_view.h"

namespace cohort {

// Mixes several keys (seed, epoch, sample index, ...) into one 64-bit seed (splitmix64
// finaliser), so every random stream is derived from its keys, never from call order.
uint64_t MixKeys(std::initializer_list<uint64_t> keys);

// splitmix64 on one value (z + 0x9e37..., then its finaliser): a bijection of 64-bit values
// whose every output bit depends on every input bit, so distinct inputs never collide and a
// row index's low bits come out as random as an id's high ones.
uint64_t MixBits(uint64_t z);

// Stable 64-bit hash of a name (FNV-1a): the same on every host and build.
uint64_t HashName(absl::string_view name);

// A small, fast generator (xoshiro256**) whose output is fixed by its seed on every
// platform, unlike std:: distributions. Not thread-safe; one per stream.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, 1) with 53 random bits.
  double Uniform();
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n), n > 0, without modulo bias.
  uint64_t Below(uint64_t n);

 private:
  uint64_t s_[4];
};

}  // namespace cohort

#endif  // COHORT_TRAINER_BASE_RANDOM_H_
