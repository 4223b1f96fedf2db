#include "trainer/optim/row_optimizer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "trainer/base/check.h"

namespace cohort {

void RowSgd::ApplyRow(absl::Span<float> weight, absl::Span<const float> grad,
                      absl::Span<float> state, float lr, int64_t step) const {
  COHORT_CHECK(weight.size() == grad.size(), "%zu weights, %zu gradients", weight.size(),
               grad.size());
  for (size_t i = 0; i < weight.size(); ++i) weight[i] -= lr * grad[i];
}

void RowAdagrad::InitState(absl::Span<float> state) const {
  std::fill(state.begin(), state.end(), options_.initial_accumulator);
}

void RowAdagrad::ApplyRow(absl::Span<float> weight, absl::Span<const float> grad,
                          absl::Span<float> state, float lr, int64_t step) const {
  COHORT_CHECK(weight.size() == grad.size() && state.size() == weight.size(),
               "%zu weights, %zu gradients, %zu state", weight.size(), grad.size(), state.size());
  const float eps = options_.eps;
  for (size_t i = 0; i < weight.size(); ++i) {
    state[i] += grad[i] * grad[i];
    weight[i] -= lr * grad[i] / (std::sqrt(state[i]) + eps);
  }
}

void RowAdam::InitState(absl::Span<float> state) const {
  std::fill(state.begin(), state.end(), 0.0f);
}

void RowAdam::ApplyRow(absl::Span<float> weight, absl::Span<const float> grad,
                       absl::Span<float> state, float lr, int64_t step) const {
  COHORT_CHECK(weight.size() == grad.size() && state.size() == 2 * weight.size() && step >= 1,
               "%zu weights, %zu gradients, %zu state, step %ld", weight.size(), grad.size(),
               state.size(), step);
  // Once a row, not once an element: the corrections in double, as the dense Adam's.
  const double t = static_cast<double>(step);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(options_.beta1, t)));
  const float bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  const float b1 = static_cast<float>(options_.beta1), b2 = static_cast<float>(options_.beta2);
  const float eps = static_cast<float>(options_.eps);
  for (size_t i = 0; i < weight.size(); ++i) {
    float& m = state[2 * i];
    float& v = state[2 * i + 1];
    m = b1 * m + (1 - b1) * grad[i];
    v = b2 * v + (1 - b2) * grad[i] * grad[i];
    weight[i] -= step_size * m / (std::sqrt(v) / bias2_sqrt + eps);
  }
}

absl::StatusOr<std::unique_ptr<RowOptimizer>> MakeRowOptimizer(absl::string_view name,
                                                               const RowAdagradOptions& adagrad,
                                                               const RowAdamOptions& adam) {
  if (name == "sgd") return std::make_unique<RowSgd>();
  if (name == "adagrad") {
    if (!(adagrad.eps > 0) || !(adagrad.initial_accumulator >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("adagrad's eps (", adagrad.eps,
                                                     ") must be > 0 and its initial accumulator (",
                                                     adagrad.initial_accumulator, ") >= 0"));
    }
    return std::make_unique<RowAdagrad>(adagrad);
  }
  if (name == "lazy_adam") {
    if (!(adam.beta1 >= 0 && adam.beta1 < 1) || !(adam.beta2 >= 0 && adam.beta2 < 1) ||
        !(adam.eps > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("lazy_adam's betas (", adam.beta1, ", ",
                                                     adam.beta2,
                                                     ") must be in [0, 1) and its "
                                                     "eps (",
                                                     adam.eps, ") > 0"));
    }
    return std::make_unique<RowAdam>(adam);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no embedding optimizer '", name, "': sgd, adagrad or lazy_adam"));
}

}  // namespace cohort
