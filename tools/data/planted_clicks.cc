#include "tools/data/planted_clicks.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "trainer/base/random.h"

namespace cohort {
namespace {

// A standard Gaussian from two uniforms in [0, 1) (Box-Muller, one of the pair).
double Gaussian(double u1, double u2) {
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
}

// The interacting pairs of categorical features.
constexpr std::pair<int, int> kPairs[] = {{0, 1}, {2, 5}, {3, 8}, {9, 10}, {12, 20}};
constexpr uint64_t kWeightSalt = 1, kFactorSalt = 2, kValueSalt = 3, kIntegerSalt = 4;

}  // namespace

PlantedClicks::PlantedClicks(PlantedClickOptions options) : options_(options), rng_(options.seed) {
  cumulative_.resize(static_cast<size_t>(std::max<int64_t>(1, options_.vocabulary)));
  double sum = 0;
  for (size_t r = 0; r < cumulative_.size(); ++r) {
    sum += std::pow(static_cast<double>(r + 1), -options_.zipf);
    cumulative_[r] = sum;
  }
  for (double& c : cumulative_) c /= sum;
  for (int j = 0; j < kClickIntegerFeatures; ++j) {
    integer_weights_.push_back(options_.integer_scale * HashedNormal(kIntegerSalt, j, 0));
  }
  heads_.resize(kClickCategoricalFeatures);
  const int64_t head = std::min<int64_t>(options_.head, cumulative_.size());
  for (int f = 0; f < kClickCategoricalFeatures; ++f) {
    for (int64_t rank = 0; rank < head; ++rank) heads_[f].insert(ValueOf(f, rank));
  }
}

uint32_t PlantedClicks::ValueOf(int feature, int64_t rank) const {
  return static_cast<uint32_t>(MixKeys(
      {options_.seed, kValueSalt, static_cast<uint64_t>(feature), static_cast<uint64_t>(rank)}));
}

double PlantedClicks::HashedNormal(uint64_t salt, int feature, uint64_t value) const {
  Rng rng(MixKeys({options_.seed, salt, static_cast<uint64_t>(feature), value}));
  const double u1 = rng.Uniform();
  return Gaussian(u1, rng.Uniform());
}

double PlantedClicks::Probability(const ClickRecord& r) const {
  double logit = options_.bias;
  for (int j = 0; j < kClickIntegerFeatures; ++j) {
    logit += integer_weights_[j] * ClickIntegerInput(r.integers[j]);
  }
  const auto weighs = [&](int f) {
    return r.has_category(f) && heads_[f].contains(r.categories[f]);
  };
  for (int f = 0; f < kClickCategoricalFeatures; ++f) {
    if (weighs(f)) logit += options_.weight_scale * HashedNormal(kWeightSalt, f, r.categories[f]);
  }
  for (const auto& [f, g] : kPairs) {
    if (!weighs(f) || !weighs(g)) continue;
    logit += options_.interaction_scale * HashedNormal(kFactorSalt, f, r.categories[f]) *
             options_.interaction_scale * HashedNormal(kFactorSalt, g, r.categories[g]);
  }
  return 1.0 / (1.0 + std::exp(-logit));
}

ClickRecord PlantedClicks::Next(float* probability) {
  ClickRecord r;
  for (int j = 0; j < kClickIntegerFeatures; ++j) {
    const double u1 = rng_.Uniform();  // before the second: the draws' order is fixed
    const double count = std::exp(static_cast<double>(j % 4) + Gaussian(u1, rng_.Uniform())) - 1.0;
    if (rng_.Uniform() < 0.1) continue;  // missing
    r.integers[j] = static_cast<int64_t>(std::floor(std::max(0.0, count)));
    r.present |= uint64_t{1} << j;
  }
  for (int f = 0; f < kClickCategoricalFeatures; ++f) {
    const double u = rng_.Uniform();
    if (rng_.Uniform() < 0.05) continue;  // missing: value 0, as a reader takes it
    const int64_t rank =
        std::upper_bound(cumulative_.begin(), cumulative_.end() - 1, u) - cumulative_.begin();
    r.categories[f] = ValueOf(f, rank);
    r.present |= uint64_t{1} << (kClickIntegerFeatures + f);
  }
  const double p = Probability(r);
  r.label = rng_.Uniform() < p ? 1 : 0;
  *probability = static_cast<float>(p);
  return r;
}

}  // namespace cohort
