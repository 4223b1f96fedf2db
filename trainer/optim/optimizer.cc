#include "trainer/optim/optimizer.h"

#include "trainer/base/check.h"

namespace cohort {

void Sgd::Update(int64_t key, absl::Span<float> weight, absl::Span<const float> grad, float lr) {
  COHORT_CHECK(weight.size() == grad.size(), "key %ld: %zu weights, %zu gradients", key,
               weight.size(), grad.size());
  const float wd = options_.weight_decay;
  if (options_.momentum == 0.0f) {
    for (size_t i = 0; i < weight.size(); ++i) weight[i] -= lr * (grad[i] + wd * weight[i]);
    return;
  }
  std::vector<float>& v = velocity_[key];
  if (v.empty()) v.assign(weight.size(), 0.0f);
  COHORT_CHECK(v.size() == weight.size(), "key %ld changed size from %zu to %zu", key, v.size(),
               weight.size());
  const float mu = options_.momentum;
  for (size_t i = 0; i < weight.size(); ++i) {
    v[i] = mu * v[i] + grad[i] + wd * weight[i];
    weight[i] -= lr * v[i];
  }
}

}  // namespace cohort
