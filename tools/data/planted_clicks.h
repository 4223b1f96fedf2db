#ifndef COHORT_TOOLS_DATA_PLANTED_CLICKS_H_
#define COHORT_TOOLS_DATA_PLANTED_CLICKS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "trainer/base/random.h"
#include "trainer/data/click_log.h"

namespace cohort {

// A click log with a model planted in it, for a trainer to learn back: each line's features
// are drawn, the planted model gives its click probability, and the label is drawn from that.
// What a trainer can reach is the planted model's own AUC on the same lines (the labels are
// coin flips around it).
//
// The features: integer j is a count, log-normal around e^(j mod 4), missing 1 time in 10;
// categorical feature f takes the value of rank r (0 = the most frequent) with probability
// ∝ (r + 1)^-zipf out of `vocabulary`, the value a hash of (seed, f, r), missing 1 time in 20.
// The model: logit = bias + Σ_j a_j·log(1 + count_j) + Σ_f w_f(value) + Σ_(f,g) u_f·u_g over a
// few pairs of features (f, g): a linear part any logistic model learns, and interactions
// that a factorisation (DLRM's dot products) learns. a, w and u are Gaussian, drawn from a
// hash of (seed, feature, value): any process gets the same model. Only the `head` most
// frequent values of a feature weigh (w = u = 0 for the others, as a rare value tells little
// in a real log): a trainer sees each of them often enough to learn it, so the planted AUC is
// one it can reach.
struct PlantedClickOptions {
  uint64_t seed = 1;
  int64_t vocabulary = 100000;  // values of each categorical feature
  int64_t head = 1000;          // of them, the most frequent that weigh
  double zipf = 1.05;
  double integer_scale = 0.1;      // of a
  double weight_scale = 0.35;      // of w
  double interaction_scale = 0.6;  // of u
  double bias = -2.0;              // about a quarter of the lines are clicks
};

class PlantedClicks {
 public:
  explicit PlantedClicks(PlantedClickOptions options);

  // The next line's features and its planted probability; its label drawn from it. Lines
  // come in one sequence for the seed: the same seed gives the same lines.
  ClickRecord Next(float* probability);
  // The planted model's click probability of a line's features (its label ignored).
  double Probability(const ClickRecord& record) const;

 private:
  // The value of rank r of feature f.
  uint32_t ValueOf(int feature, int64_t rank) const;
  // A standard Gaussian drawn from a hash of (seed, salt, feature, value): the same every time.
  double HashedNormal(uint64_t salt, int feature, uint64_t value) const;

  const PlantedClickOptions options_;
  Rng rng_;                         // the lines' draws, in one sequence for the seed
  std::vector<double> cumulative_;  // Zipf's, over the ranks
  std::vector<double> integer_weights_;
  // By feature: its `head` values, which weigh.
  std::vector<absl::flat_hash_set<uint32_t>> heads_;
};

}  // namespace cohort

#endif  // COHORT_TOOLS_DATA_PLANTED_CLICKS_H_
