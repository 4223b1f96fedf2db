#include "trainer/optim/optimizer.h"

#include <cmath>
#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"
#include "trainer/base/check.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

// NaN fails every check.
absl::Status InUnitInterval(absl::string_view what, double value) {
  if (value >= 0 && value < 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, "=", value, ": must be in [0, 1)"));
}

// The state's tensors must be exactly `names`, each of `size` elements.
absl::Status CheckStateTensors(absl::string_view optimizer, int64_t key, int64_t size,
                               const OptimizerState& state,
                               std::initializer_list<absl::string_view> names) {
  for (absl::string_view name : names) {
    auto it = state.tensors.find(std::string(name));
    if (it == state.tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat(optimizer, " state of key ", key,
                                                     " lacks its \"", name, "\" tensor"));
    }
    if (static_cast<int64_t>(it->second.size()) != size) {
      return absl::InvalidArgumentError(absl::StrCat(optimizer, " state \"", name, "\" of key ",
                                                     key, " has ", it->second.size(),
                                                     " elements; the key has ", size));
    }
  }
  if (state.tensors.size() != names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(optimizer, " state of key ", key, " has ",
                                                   state.tensors.size(), " tensors, expected ",
                                                   names.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckWeightDecay(double wd) {
  if (wd >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--wd=", wd, ": must be >= 0"));
}

}  // namespace

void Optimizer::Update(int64_t key, absl::Span<float> weight, absl::Span<const float> grad,
                       float lr) {
  COHORT_CHECK(weight.size() == grad.size(), "key %ld: %zu weights, %zu gradients", key,
               weight.size(), grad.size());
  BeginUpdate(key, static_cast<int64_t>(weight.size()));
  Apply(key, 0, weight, grad, lr);
}

void Sgd::BeginUpdate(int64_t key, int64_t size) {
  if (options_.momentum == 0.0f) return;
  std::vector<float>& v = velocity_[key];
  if (v.empty()) v.assign(size, 0.0f);
  COHORT_CHECK(static_cast<int64_t>(v.size()) == size, "key %ld changed size from %zu to %ld",
               key, v.size(), size);
}

void Sgd::Apply(int64_t key, int64_t offset, absl::Span<float> weight,
                absl::Span<const float> grad, float lr) {
  COHORT_CHECK(weight.size() == grad.size(), "key %ld: %zu weights, %zu gradients", key,
               weight.size(), grad.size());
  const float wd = options_.weight_decay;
  if (options_.momentum == 0.0f) {
    for (size_t i = 0; i < weight.size(); ++i) weight[i] -= lr * (grad[i] + wd * weight[i]);
    return;
  }
  std::vector<float>& velocity = velocity_[key];
  COHORT_CHECK(offset + weight.size() <= velocity.size(), "key %ld: slice [%ld, +%zu) of %zu",
               key, offset, weight.size(), velocity.size());
  float* v = velocity.data() + offset;
  const float mu = options_.momentum;
  for (size_t i = 0; i < weight.size(); ++i) {
    v[i] = mu * v[i] + grad[i] + wd * weight[i];
    weight[i] -= lr * v[i];
  }
}

OptimizerState Sgd::SaveState(int64_t key) const {
  OptimizerState state;
  auto it = velocity_.find(key);
  if (it != velocity_.end()) state.tensors["velocity"] = it->second;
  return state;
}

absl::Status Sgd::LoadState(int64_t key, int64_t size, const OptimizerState& state) {
  // Before the first update with momentum there is no velocity yet (it starts at zero).
  if (state.tensors.empty()) {
    velocity_.erase(key);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckStateTensors("sgd", key, size, state, {"velocity"}));
  velocity_[key] = state.tensors.at("velocity");
  return absl::OkStatus();
}

OptimizerState Adam::SaveState(int64_t key) const {
  OptimizerState state;
  auto it = state_.find(key);
  if (it == state_.end() || it->second.t == 0) return state;
  state.tensors["m"] = it->second.m;
  state.tensors["v"] = it->second.v;
  state.updates = it->second.t;
  return state;
}

absl::Status Adam::LoadState(int64_t key, int64_t size, const OptimizerState& state) {
  if (state.updates == 0 && state.tensors.empty()) {
    state_.erase(key);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckStateTensors("adam", key, size, state, {"m", "v"}));
  if (state.updates < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam state of key ", key, " has moments but ", state.updates, " updates"));
  }
  State& s = state_[key];
  s.m = state.tensors.at("m");
  s.v = state.tensors.at("v");
  s.t = state.updates;  // BeginUpdate derives the bias corrections from t
  return absl::OkStatus();
}

void Adam::BeginUpdate(int64_t key, int64_t size) {
  State& s = state_[key];
  if (s.t == 0) {
    s.m.assign(size, 0.0f);
    s.v.assign(size, 0.0f);
  }
  COHORT_CHECK(static_cast<int64_t>(s.m.size()) == size, "key %ld changed size from %zu to %ld",
               key, s.m.size(), size);
  ++s.t;
  s.bias1 = 1 - std::pow(options_.beta1, s.t);
  s.bias2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(options_.beta2, s.t)));
}

void Adam::Apply(int64_t key, int64_t offset, absl::Span<float> weight,
                 absl::Span<const float> grad, float lr) {
  COHORT_CHECK(weight.size() == grad.size(), "key %ld: %zu weights, %zu gradients", key,
               weight.size(), grad.size());
  State& s = state_[key];
  COHORT_CHECK(s.t > 0 && offset + weight.size() <= s.m.size(),
               "key %ld: slice [%ld, +%zu) of %zu outside an update", key, offset, weight.size(),
               s.m.size());
  // PyTorch's arrangement of the formula, so results agree to float rounding.
  const float step_size = static_cast<float>(lr / s.bias1);
  const float bias2_sqrt = s.bias2_sqrt;
  const float b1 = static_cast<float>(options_.beta1), b2 = static_cast<float>(options_.beta2);
  const float one_minus_b1 = static_cast<float>(1 - options_.beta1);
  const float one_minus_b2 = static_cast<float>(1 - options_.beta2);
  const float eps = static_cast<float>(options_.eps);
  const float wd = static_cast<float>(options_.weight_decay);
  float* m = s.m.data() + offset;
  float* v = s.v.data() + offset;
  for (size_t i = 0; i < weight.size(); ++i) {
    const float g = grad[i] + wd * weight[i];
    m[i] = b1 * m[i] + one_minus_b1 * g;
    v[i] = b2 * v[i] + one_minus_b2 * g * g;
    weight[i] -= step_size * (m[i] / (std::sqrt(v[i]) / bias2_sqrt + eps));
  }
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(absl::string_view name,
                                                         const OptimizerOptions& options) {
  if (name == "sgd") {
    RETURN_IF_ERROR(InUnitInterval("--momentum", options.momentum));
    RETURN_IF_ERROR(CheckWeightDecay(options.weight_decay));
    return std::make_unique<Sgd>(SgdOptions{static_cast<float>(options.momentum),
                                            static_cast<float>(options.weight_decay)});
  }
  if (name == "adam") {
    RETURN_IF_ERROR(CheckWeightDecay(options.weight_decay));
    RETURN_IF_ERROR(InUnitInterval("adam beta1", options.beta1));
    RETURN_IF_ERROR(InUnitInterval("adam beta2", options.beta2));
    if (!(options.eps > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("adam eps=", options.eps, ": must be > 0"));
    }
    return std::make_unique<Adam>(
        AdamOptions{options.beta1, options.beta2, options.eps, options.weight_decay});
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--optimizer=", name, ": expected sgd or adam"));
}

}  // namespace cohort
