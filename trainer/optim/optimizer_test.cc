#include "trainer/optim/optimizer.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

TEST(AdamTest, ThreeStepsHandComputed) {
  // lr 0.1, β1 0.9, β2 0.999, eps 1e-8. Gradients of constant magnitude keep v̂ = g², so only m̂
  // varies. Weight 0 sees +0.5, -0.5, +0.5:
  //   t=1: m = 0.05,    v = 0.00025,      m̂ = 0.5,                   v̂ = 0.25, w = 1 - 0.1 = 0.9
  //   t=2: m = -0.005,  v = 0.00049975,   m̂ = -0.005/0.19 = -1/38,   v̂ = 0.25,
  //        w = 0.9 + 0.1·(1/38)/0.5 = 0.9052632
  //   t=3: m = 0.0455,  v = 0.00074925025, m̂ = 0.0455/0.271 = 0.1678967, v̂ = 0.25,
  //        w = 0.9052632 - 0.1·0.1678967/0.5 = 0.8716838
  // Weight 1 sees -1 every step: m̂ = -1, v̂ = 1, so each step moves it by lr: -2 → -1.7.
  Adam adam({});
  std::vector<float> w{1.0f, -2.0f};
  adam.Update(0, absl::MakeSpan(w), std::vector<float>{0.5f, -1.0f}, 0.1f);
  EXPECT_NEAR(w[0], 0.9f, 1e-6);
  EXPECT_NEAR(w[1], -1.9f, 1e-6);
  adam.Update(0, absl::MakeSpan(w), std::vector<float>{-0.5f, -1.0f}, 0.1f);
  EXPECT_NEAR(w[0], 0.9052632f, 1e-6);
  EXPECT_NEAR(w[1], -1.8f, 1e-6);
  adam.Update(0, absl::MakeSpan(w), std::vector<float>{0.5f, -1.0f}, 0.1f);
  EXPECT_NEAR(w[0], 0.8716838f, 1e-6);
  EXPECT_NEAR(w[1], -1.7f, 1e-6);
}

TEST(AdamTest, WeightDecayAndEpsHandComputed) {
  // wd 0.25, eps 0.5, lr 0.2, w0 = 2; the gradients make g = grad + 0.25·w = ±0.5.
  //   t=1: grad 0:      g = 0.5,  m̂ = 0.5,   v̂ = 0.25, w = 2 - 0.2·0.5/(0.5 + 0.5) = 1.9
  //   t=2: grad -0.975: g = -0.5, m̂ = -1/38, v̂ = 0.25, w = 1.9 + 0.2·(1/38)/1 = 1.9052632
  // eps joins the bias-corrected sqrt(v̂) = 0.5; joining the uncorrected sqrt(v) = 0.0158 (the
  // Adam paper's efficient form) would give 1.9939 at t=1.
  Adam adam({0.9, 0.999, 0.5, 0.25});
  std::vector<float> w{2.0f};
  adam.Update(3, absl::MakeSpan(w), std::vector<float>{0.0f}, 0.2f);
  EXPECT_NEAR(w[0], 1.9f, 1e-6);
  adam.Update(3, absl::MakeSpan(w), std::vector<float>{-0.975f}, 0.2f);
  EXPECT_NEAR(w[0], 1.9052632f, 1e-6);
}

TEST(AdamTest, StateIsPerKey) {
  // Key 1's first update is a first step (t = 1, fresh m and v) however often key 0 moved:
  // with a constant gradient of magnitude 1 every step moves a weight by exactly lr.
  Adam adam({});
  std::vector<float> a{0.0f}, b{0.0f};
  adam.Update(0, absl::MakeSpan(a), std::vector<float>{1.0f}, 0.1f);
  adam.Update(0, absl::MakeSpan(a), std::vector<float>{1.0f}, 0.1f);
  adam.Update(1, absl::MakeSpan(b), std::vector<float>{-1.0f}, 0.1f);
  adam.Update(0, absl::MakeSpan(a), std::vector<float>{1.0f}, 0.1f);
  EXPECT_NEAR(a[0], -0.3f, 1e-6);
  EXPECT_NEAR(b[0], 0.1f, 1e-6);
}

TEST(AdamTest, TwoHalvesUnderTwoKeysEqualTheWholeTensor) {
  // A shard holds parts of a tensor under their own keys; the result must be bit-identical.
  const int n = 10;
  std::vector<float> whole(n), grad(n);
  for (int i = 0; i < n; ++i) whole[i] = 0.3f * i - 1.0f;
  std::vector<float> parts = whole;
  Adam one({0.9, 0.999, 1e-8, 0.01}), split({0.9, 0.999, 1e-8, 0.01});
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < n; ++i) grad[i] = 0.1f * (i - 4) * (step + 1) + 0.05f * step;
    one.Update(7, absl::MakeSpan(whole), grad, 0.01f);
    split.Update(70, absl::MakeSpan(parts).subspan(0, n / 2),
                 absl::MakeConstSpan(grad).subspan(0, n / 2), 0.01f);
    split.Update(71, absl::MakeSpan(parts).subspan(n / 2),
                 absl::MakeConstSpan(grad).subspan(n / 2), 0.01f);
  }
  EXPECT_EQ(parts, whole);
}

// A checkpoint's state, loaded into a fresh optimizer, continues bitwise as the saved one.
TEST(OptimizerTest, SavedStateContinuesBitwise) {
  const OptimizerOptions options{0.9, 1e-2, 0.9, 0.999, 1e-8};
  for (const char* name : {"sgd", "adam"}) {
    auto original = MakeOptimizer(name, options);
    auto resumed = MakeOptimizer(name, options);
    ASSERT_TRUE(original.ok() && resumed.ok());
    const int n = 100;
    std::vector<float> w(n), g(n);
    for (int i = 0; i < n; ++i) w[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
    const auto grad = [&](int step) {
      for (int i = 0; i < n; ++i) g[i] = 0.003f * static_cast<float>((i * 5 + step) % 17) - 0.02f;
      return absl::MakeConstSpan(g);
    };
    // A state saved before any update is empty, and loads as such.
    EXPECT_TRUE((*original)->SaveState(7).tensors.empty()) << name;
    for (int step = 0; step < 3; ++step) (*original)->Update(7, absl::MakeSpan(w), grad(step), 0.01f);
    const OptimizerState saved = (*original)->SaveState(7);
    EXPECT_EQ(saved.tensors.size(), std::string(name) == "sgd" ? 1u : 2u) << name;
    if (std::string(name) == "adam") {
      EXPECT_EQ(saved.updates, 3);
    }
    ASSERT_TRUE((*resumed)->LoadState(7, n, saved).ok()) << name;
    std::vector<float> w2 = w;
    for (int step = 3; step < 6; ++step) {
      (*original)->Update(7, absl::MakeSpan(w), grad(step), 0.01f);
      (*resumed)->Update(7, absl::MakeSpan(w2), grad(step), 0.01f);
    }
    EXPECT_EQ(w, w2) << name;

    OptimizerState wrong = saved;
    wrong.tensors.begin()->second.pop_back();
    EXPECT_EQ((*resumed)->LoadState(7, n, wrong).code(), absl::StatusCode::kInvalidArgument)
        << name;
    wrong = saved;
    wrong.tensors["extra"] = std::vector<float>(n);
    EXPECT_EQ((*resumed)->LoadState(7, n, wrong).code(), absl::StatusCode::kInvalidArgument)
        << name;
  }
}

// A shard applies each gradient in blocks as it arrives: any slicing gives the same bits.
TEST(OptimizerTest, SlicedUpdatesEqualWholeUpdatesBitwise) {
  const OptimizerOptions options{0.9, 1e-2, 0.9, 0.999, 1e-8};
  for (const char* name : {"sgd", "adam"}) {
    auto whole = MakeOptimizer(name, options);
    auto sliced = MakeOptimizer(name, options);
    ASSERT_TRUE(whole.ok() && sliced.ok());
    const int n = 1000;
    std::vector<float> a(n), b(n), g(n);
    for (int i = 0; i < n; ++i) a[i] = b[i] = 0.01f * static_cast<float>(i % 37) - 0.2f;
    for (int step = 0; step < 4; ++step) {
      for (int i = 0; i < n; ++i) g[i] = 0.001f * static_cast<float>((i * 7 + step * 3) % 41) - 0.02f;
      (*whole)->Update(3, absl::MakeSpan(a), g, 0.01f);
      (*sliced)->BeginUpdate(3, n);
      // Uneven slices, out of order.
      const int cuts[][2] = {{600, 400}, {0, 1}, {1, 255}, {256, 344}};
      for (const auto& [offset, size] : cuts) {
        (*sliced)->Apply(3, offset, absl::MakeSpan(b).subspan(offset, size),
                         absl::MakeConstSpan(g).subspan(offset, size), 0.01f);
      }
    }
    EXPECT_EQ(a, b) << name;
  }
}

TEST(MakeOptimizerTest, BuildsSgd) {
  // As SgdTest.MomentumAndWeightDecayOverThreeSteps, step 1.
  OptimizerOptions options;
  options.momentum = 0.9;
  options.weight_decay = 0.1;
  auto sgd = MakeOptimizer("sgd", options);
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  std::vector<float> w{2.0f};
  (*sgd)->Update(0, absl::MakeSpan(w), std::vector<float>{1.0f}, 0.5f);
  EXPECT_NEAR(w[0], 1.4f, 1e-6);
}

TEST(MakeOptimizerTest, BuildsAdamIgnoringMomentum) {
  // As AdamTest.WeightDecayAndEpsHandComputed, step 1.
  OptimizerOptions options;
  options.momentum = 0.9;
  options.weight_decay = 0.25;
  options.eps = 0.5;
  auto adam = MakeOptimizer("adam", options);
  ASSERT_TRUE(adam.ok()) << adam.status();
  std::vector<float> w{2.0f};
  (*adam)->Update(0, absl::MakeSpan(w), std::vector<float>{0.0f}, 0.2f);
  EXPECT_NEAR(w[0], 1.9f, 1e-6);
}

TEST(MakeOptimizerTest, RejectsUnknownNamesAndBadValues) {
  // Sets one field of the defaults, then expects the error message.
  auto expect_error = [](absl::string_view name, double OptimizerOptions::*field, double value,
                         absl::string_view message) {
    OptimizerOptions options;
    options.*field = value;
    auto optimizer = MakeOptimizer(name, options);
    EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_EQ(optimizer.status().message(), message);
  };
  expect_error("foo", &OptimizerOptions::momentum, 0, "--optimizer=foo: expected sgd or adam");
  expect_error("sgd", &OptimizerOptions::momentum, 1, "--momentum=1: must be in [0, 1)");
  expect_error("sgd", &OptimizerOptions::weight_decay, -0.5, "--wd=-0.5: must be >= 0");
  expect_error("adam", &OptimizerOptions::weight_decay, -0.5, "--wd=-0.5: must be >= 0");
  expect_error("adam", &OptimizerOptions::beta1, -0.1, "adam beta1=-0.1: must be in [0, 1)");
  expect_error("adam", &OptimizerOptions::beta2, 1, "adam beta2=1: must be in [0, 1)");
  expect_error("adam", &OptimizerOptions::eps, 0, "adam eps=0: must be > 0");
}

}  // namespace
}  // namespace cohort
