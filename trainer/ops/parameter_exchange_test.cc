#include "trainer/ops/parameter_exchange.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// One replica's exchange of one key played on the host: its gradient comes down as it is (or as
// zeros, reported, for an overflow) and its value is whatever the replica's host value holds.
class FakeExchange final : public ParameterExchange {
 public:
  FakeExchange(std::vector<float> grad, bool overflowed)
      : grad_(Shape{static_cast<int64_t>(grad.size())}),
        value_(Shape{static_cast<int64_t>(grad.size())}),
        overflowed_(overflowed) {
    std::copy(grad.begin(), grad.end(), grad_.data<float>());
    if (overflowed_) grad_.SetZero();
  }
  void SendGradient(int64_t) override { ++sent; }
  bool GradientArrived(int64_t) override { return true; }
  const Tensor& HostGradient(int64_t) override { return grad_; }
  bool GradientZeroed(int64_t) override { return overflowed_; }
  Tensor* HostValue(int64_t) override { return &value_; }
  void ReceiveValue(int64_t) override { ++received; }

  int sent = 0, received = 0;

 private:
  Tensor grad_, value_;
  const bool overflowed_;
};

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// g0·w0 + w1·g1 + w2·g2, each product and sum rounded alone; every replica gets the value.
TEST(HostReplicaExchangeTest, SumsInReplicaOrderAndHandsTheValueToEveryReplica) {
  const std::vector<std::vector<float>> g = {{1.5f, -2.25f, 1e-3f}, {0.1f, 3.0f, -7.0f},
                                             {1e8f, -1e-8f, 0.3f}};
  const std::vector<float> w = {17.0f / 33, 10.0f / 33, 6.0f / 33};
  std::vector<FakeExchange*> fakes;
  std::vector<std::unique_ptr<ParameterExchange>> each;
  for (const auto& grad : g) {
    auto fake = std::make_unique<FakeExchange>(grad, false);
    fakes.push_back(fake.get());
    each.push_back(std::move(fake));
  }
  auto exchange = MakeHostReplicaExchange(std::move(each));
  for (int r = 0; r < 3; ++r) exchange->GradientDone(r, 0);
  exchange->Reduce(0, w);
  ASSERT_TRUE(exchange->GradientArrived(0));
  std::vector<float> want(3);
  for (size_t i = 0; i < 3; ++i) {
    want[i] = g[0][i] * w[0];
    want[i] += w[1] * g[1][i];
    want[i] += w[2] * g[2][i];
  }
  EXPECT_EQ(Floats(exchange->HostGradient(0)), want);
  Tensor* value = exchange->HostValue(0);
  for (float& v : value->span<float>()) v = 0.5f;
  for (int r = 0; r < 3; ++r) exchange->ReceiveValue(r, 0);
  for (FakeExchange* fake : fakes) {
    EXPECT_EQ(fake->sent, 1);
    EXPECT_EQ(fake->received, 1);
    EXPECT_EQ(Floats(*fake->HostValue(0)), std::vector<float>(3, 0.5f));
  }
}

// One replica's overflow voids the key's gradient: zeros are pushed, as one replica pushes.
TEST(HostReplicaExchangeTest, AReplicasOverflowZeroesTheSum) {
  std::vector<std::unique_ptr<ParameterExchange>> each;
  each.push_back(std::make_unique<FakeExchange>(std::vector<float>{1, 2}, false));
  each.push_back(std::make_unique<FakeExchange>(std::vector<float>{3, 4}, true));
  auto exchange = MakeHostReplicaExchange(std::move(each));
  exchange->Reduce(0, std::vector<float>{0.5f, 0.5f});
  EXPECT_EQ(Floats(exchange->HostGradient(0)), std::vector<float>(2, 0.0f));
}

// A lone replica's gradient goes as it is.
TEST(HostReplicaExchangeTest, OneReplicaPushesItsOwnGradient) {
  std::vector<std::unique_ptr<ParameterExchange>> each;
  each.push_back(std::make_unique<FakeExchange>(std::vector<float>{1, 2}, false));
  const ParameterExchange* only = each[0].get();
  auto exchange = MakeHostReplicaExchange(std::move(each));
  exchange->Reduce(0, std::vector<float>{1.0f});
  EXPECT_EQ(&exchange->HostGradient(0), &const_cast<ParameterExchange*>(only)->HostGradient(0));
}

}  // namespace
}  // namespace cohort
