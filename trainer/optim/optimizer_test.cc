#include "trainer/optim/optimizer.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(SgdTest, PlainStep) {
  Sgd sgd({});
  std::vector<float> w{1.0f, -2.0f};
  const std::vector<float> g{0.5f, 0.25f};
  sgd.Update(0, absl::MakeSpan(w), g, 0.1f);
  EXPECT_FLOAT_EQ(w[0], 0.95f);
  EXPECT_FLOAT_EQ(w[1], -2.025f);
}

TEST(SgdTest, MomentumAndWeightDecayOverThreeSteps) {
  // Hand-computed with momentum 0.9, wd 0.1, lr 0.5, constant gradient 1 on w0 = 2.
  //   step 1: g = 1 + 0.2 = 1.2,     v = 1.2,                      w = 2 - 0.6 = 1.4
  //   step 2: g = 1 + 0.14 = 1.14,   v = 1.08 + 1.14 = 2.22,       w = 1.4 - 1.11 = 0.29
  //   step 3: g = 1 + 0.029 = 1.029, v = 1.998 + 1.029 = 3.027,    w = 0.29 - 1.5135 = -1.2235
  Sgd sgd({0.9f, 0.1f});
  std::vector<float> w{2.0f};
  const std::vector<float> g{1.0f};
  sgd.Update(5, absl::MakeSpan(w), g, 0.5f);
  EXPECT_NEAR(w[0], 1.4f, 1e-6);
  sgd.Update(5, absl::MakeSpan(w), g, 0.5f);
  EXPECT_NEAR(w[0], 0.29f, 1e-6);
  sgd.Update(5, absl::MakeSpan(w), g, 0.5f);
  EXPECT_NEAR(w[0], -1.2235f, 1e-5);
}

TEST(SgdTest, StateIsPerKey) {
  Sgd sgd({0.9f, 0.0f});
  std::vector<float> a{0.0f}, b{0.0f};
  const std::vector<float> g{1.0f};
  sgd.Update(0, absl::MakeSpan(a), g, 1.0f);
  sgd.Update(0, absl::MakeSpan(a), g, 1.0f);  // v = 1.9
  sgd.Update(1, absl::MakeSpan(b), g, 1.0f);  // a fresh key starts at v = 1
  EXPECT_FLOAT_EQ(a[0], -2.9f);
  EXPECT_FLOAT_EQ(b[0], -1.0f);
}

TEST(SgdTest, MinimisesAQuadratic) {
  // f(w) = 0.5 · Σ c_i (w_i - t_i)²: momentum SGD converges to t.
  Sgd sgd({0.9f, 0.0f});
  std::vector<float> w{5.0f, -3.0f, 0.0f};
  const std::vector<float> c{1.0f, 4.0f, 0.5f}, t{1.0f, 2.0f, -1.0f};
  std::vector<float> g(3);
  for (int step = 0; step < 300; ++step) {
    for (int i = 0; i < 3; ++i) g[i] = c[i] * (w[i] - t[i]);
    sgd.Update(0, absl::MakeSpan(w), g, 0.05f);
  }
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i], t[i], 1e-4);
}

}  // namespace
}  // namespace cohort
