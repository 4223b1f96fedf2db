#include "trainer/ops/parameter_exchange.h"

#include "trainer/base/check.h"

namespace cohort {
namespace {

class InPlaceExchange final : public ParameterExchange {
 public:
  explicit InPlaceExchange(std::vector<ParameterTensors> params) : params_(std::move(params)) {
    for (const ParameterTensors& p : params_) {
      COHORT_CHECK(IsHostTensorOf(*p.value, DType::kF32),
                   "an in-place exchange needs F32 host parameters");
    }
  }

  void SendGradient(int64_t) override {}
  bool GradientArrived(int64_t) override { return true; }
  const Tensor& HostGradient(int64_t key) override { return *params_[key].grad; }
  Tensor* HostValue(int64_t key) override { return params_[key].value; }
  void ReceiveValue(int64_t) override {}

 private:
  const std::vector<ParameterTensors> params_;
};

class HostReplicaExchange final : public ReplicaExchange {
 public:
  explicit HostReplicaExchange(std::vector<std::unique_ptr<ParameterExchange>> exchanges)
      : exchanges_(std::move(exchanges)) {
    COHORT_CHECK(!exchanges_.empty(), "a replica exchange needs a replica");
  }

  float BeginStep(int r) override { return exchanges_[r]->BeginStep(); }
  void GradientDone(int r, int64_t key) override { exchanges_[r]->SendGradient(key); }
  void Reduce(int64_t key, absl::Span<const float> weights) override {
    if (static_cast<size_t>(key) >= weights_.size()) weights_.resize(key + 1);
    weights_[key].assign(weights.begin(), weights.end());
  }
  bool GradientArrived(int64_t key) override {
    for (const auto& exchange : exchanges_) {
      if (!exchange->GradientArrived(key)) return false;
    }
    return true;
  }
  const Tensor& HostGradient(int64_t key) override {
    const Tensor& first = exchanges_[0]->HostGradient(key);
    if (exchanges_.size() == 1) return first;
    if (static_cast<size_t>(key) >= sums_.size()) sums_.resize(key + 1);
    Tensor& out = sums_[key];
    out.Resize(first.shape());
    float* sum = out.data<float>();
    const int64_t n = first.numel();
    const std::vector<float>& w = weights_[key];
    const float* g0 = first.data<float>();
    bool zeroed = exchanges_[0]->GradientZeroed(key);
    for (int64_t i = 0; i < n; ++i) sum[i] = g0[i] * w[0];
    for (size_t r = 1; r < exchanges_.size(); ++r) {
      const float* g = exchanges_[r]->HostGradient(key).data<float>();
      zeroed = zeroed || exchanges_[r]->GradientZeroed(key);
      for (int64_t i = 0; i < n; ++i) sum[i] += w[r] * g[i];
    }
    // A replica's overflow voids the step's gradient of this key, as it does for one replica.
    if (zeroed) out.SetZero();
    return out;
  }
  Tensor* HostValue(int64_t key) override {
    if (static_cast<size_t>(key) >= targets_.size()) targets_.resize(key + 1);
    return targets_[key] = exchanges_[0]->HostValue(key);
  }
  void ReceiveValue(int r, int64_t key) override {
    if (r > 0) exchanges_[r]->HostValue(key)->CopyFrom(*targets_[key]);
    exchanges_[r]->ReceiveValue(key);
  }

 private:
  const std::vector<std::unique_ptr<ParameterExchange>> exchanges_;
  // By key: the weights of the last Reduce, the sum pushed, where replica 0's value arrives.
  std::vector<std::vector<float>> weights_;
  std::vector<Tensor> sums_;
  std::vector<Tensor*> targets_;
};

}  // namespace

std::unique_ptr<ReplicaExchange> MakeHostReplicaExchange(
    std::vector<std::unique_ptr<ParameterExchange>> exchanges) {
  return std::make_unique<HostReplicaExchange>(std::move(exchanges));
}

std::unique_ptr<ParameterExchange> MakeInPlaceExchange(std::vector<ParameterTensors> params) {
  return std::make_unique<InPlaceExchange>(std::move(params));
}

}  // namespace cohort
