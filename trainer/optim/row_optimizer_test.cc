#include "trainer/optim/row_optimizer.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

constexpr int kRows = 6, kDim = 5;

// A table and its state, in double: the plain reference of each rule, PyTorch's formulas for a
// sparse gradient written out element by element.
struct ReferenceTable {
  std::vector<double> w, a, b;  // a: Adagrad's sum, Adam's m; b: Adam's v
  int64_t steps = 0;
};

void ReferenceStep(const std::string& rule, ReferenceTable& t, const std::vector<int>& rows,
                   const std::vector<float>& grads, double lr) {
  ++t.steps;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int i = 0; i < kDim; ++i) {
      const size_t e = static_cast<size_t>(rows[r]) * kDim + i;
      const double g = grads[r * kDim + i];
      if (rule == "sgd") {
        t.w[e] -= lr * g;
      } else if (rule == "adagrad") {
        t.a[e] += g * g;
        t.w[e] -= lr * g / (std::sqrt(t.a[e]) + 1e-10);
      } else {
        t.a[e] = 0.9 * t.a[e] + 0.1 * g;
        t.b[e] = 0.999 * t.b[e] + 0.001 * g * g;
        const double m_hat = t.a[e] / (1 - std::pow(0.9, t.steps));
        const double v_hat = t.b[e] / (1 - std::pow(0.999, t.steps));
        t.w[e] -= lr * m_hat / (std::sqrt(v_hat) + 1e-8);
      }
    }
  }
}

class RowOptimizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RowOptimizerTest, TouchedRowsFollowTheReferenceAndTheOthersKeepValueAndState) {
  std::unique_ptr<RowOptimizer> rule = *MakeRowOptimizer(GetParam(), {}, {});
  const int s = rule->state_floats();
  std::mt19937 random(3);
  std::normal_distribution<float> normal;
  std::vector<float> w(kRows * kDim), state(kRows * kDim * s);
  for (float& x : w) x = normal(random);
  rule->InitState(absl::MakeSpan(state));
  ReferenceTable ref{std::vector<double>(w.begin(), w.end()), std::vector<double>(kRows * kDim),
                     std::vector<double>(kRows * kDim)};
  // Steps touching different rows (row 5 never): a row first touched at step 3 gets the
  // bias corrections of step 3.
  const std::vector<std::vector<int>> touched = {{0, 2}, {2}, {1, 3, 4}, {0}, {4, 2}, {1}};
  for (size_t step = 0; step < touched.size(); ++step) {
    std::vector<float> grads;
    for (size_t k = 0; k < touched[step].size() * kDim; ++k) grads.push_back(normal(random));
    for (size_t r = 0; r < touched[step].size(); ++r) {
      const int row = touched[step][r];
      rule->ApplyRow(absl::MakeSpan(w).subspan(row * kDim, kDim),
                     absl::MakeConstSpan(grads).subspan(r * kDim, kDim),
                     absl::MakeSpan(state).subspan(row * kDim * s, kDim * s), 0.05f,
                     static_cast<int64_t>(step) + 1);
    }
    ReferenceStep(GetParam(), ref, touched[step], grads, 0.05);
  }
  for (int e = 0; e < kRows * kDim; ++e) {
    EXPECT_NEAR(w[e], ref.w[e], 1e-5 * (1 + std::abs(ref.w[e]))) << GetParam() << " element " << e;
  }
  // The untouched row: its value as it began, its state as InitState left it.
  std::vector<float> fresh(kDim * s);
  rule->InitState(absl::MakeSpan(fresh));
  for (int i = 0; i < kDim; ++i)
    EXPECT_EQ(w[5 * kDim + i], static_cast<float>(ref.w[5 * kDim + i]));
  for (int i = 0; i < kDim * s; ++i) EXPECT_EQ(state[5 * kDim * s + i], fresh[i]);
}

INSTANTIATE_TEST_SUITE_P(Rules, RowOptimizerTest, ::testing::Values("sgd", "adagrad", "lazy_adam"));

TEST(RowOptimizerTest, AdagradStartsFromItsInitialAccumulator) {
  RowAdagrad adagrad({.initial_accumulator = 0.1f});
  std::vector<float> w = {1.0f}, state(1);
  adagrad.InitState(absl::MakeSpan(state));
  EXPECT_EQ(state[0], 0.1f);
  adagrad.ApplyRow(absl::MakeSpan(w), std::vector<float>{0.3f}, absl::MakeSpan(state), 0.5f, 1);
  EXPECT_NEAR(state[0], 0.1 + 0.09, 1e-7);
  EXPECT_NEAR(w[0], 1.0 - 0.5 * 0.3 / std::sqrt(0.19), 1e-6);
}

TEST(RowOptimizerTest, NamesAndRefusals) {
  EXPECT_EQ((*MakeRowOptimizer("lazy_adam", {}, {}))->name(), "lazy_adam");
  EXPECT_EQ(MakeRowOptimizer("adam", {}, {}).status().message(),
            "no embedding optimizer 'adam': sgd, adagrad or lazy_adam");
  EXPECT_FALSE(MakeRowOptimizer("adagrad", {.eps = 0.0f}, {}).ok());
  EXPECT_FALSE(MakeRowOptimizer("lazy_adam", {}, {.beta1 = 1.0}).ok());
}

}  // namespace
}  // namespace cohort
