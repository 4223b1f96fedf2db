// The model's hooks, on which overlapped communication relies: before-forward runs for every
// layer in order, before that layer reads its parameters; gradient-ready runs once per
// parameter per backward, last layer first, when its gradient is final (ResNet-20, whose
// shortcuts sum gradients from two consumers).

#include "trainer/nn/model.h"

#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/models/models.h"
#include "trainer/nn/loss.h"
#include "trainer/ops/cpu/onednn_backend.h"
#include "trainer/ops/reference/reference_backend.h"

namespace cohort {
namespace {

constexpr int kClasses = 10;

Tensor RandomImages(int64_t n, uint64_t seed) {
  Tensor t(Shape{n, 3, 32, 32});
  Rng rng(seed);
  for (float& v : t.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  return t;
}

TEST(ModelHooksTest, BeforeForwardRunsForEveryLayerInOrderBeforeItReadsItsParameters) {
  OnednnBackend backend;
  auto model = BuildModel("resnet20", &backend, Shape{3, 32, 32}, kClasses);
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->InitParameters(7);
  const int last = (*model)->num_layers() - 1;
  std::vector<int> order;
  (*model)->SetBeforeForwardHook([&](int i, Layer& layer) {
    order.push_back(i);
    if (i != last) return;
    // What the hook writes into the classifier is what its forward reads: weight 0, bias b.
    for (Parameter& p : layer.parameters()) {
      float* v = p.value.data<float>();
      for (int64_t k = 0; k < p.value.numel(); ++k) v[k] = p.value.shape().rank() == 1 ? 0.25f * k : 0;
    }
  });
  const Tensor& logits = (*model)->Forward(Mode::kTrain, RandomImages(2, 1));
  std::vector<int> expected(last + 1);
  for (int i = 0; i <= last; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
  for (int64_t n = 0; n < 2; ++n) {
    for (int k = 0; k < kClasses; ++k) {
      EXPECT_EQ(logits.data<float>()[n * kClasses + k], 0.25f * k) << n << "," << k;
    }
  }
}

TEST(ModelHooksTest, GradientReadyRunsOncePerParameterLastLayerFirstWithTheFinalGradient) {
  OnednnBackend backend;
  auto built = BuildModel("resnet20", &backend, Shape{3, 32, 32}, kClasses);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& model = **built;
  model.InitParameters(7);
  absl::flat_hash_map<const Parameter*, int> layer_of;
  for (int i = 0; i < model.num_layers(); ++i) {
    for (Parameter& p : model.layer(i).parameters()) layer_of[&p] = i;
  }
  std::vector<const Parameter*> ready;
  std::vector<std::vector<float>> at_hook;
  model.SetGradientReadyHook([&](Parameter& p) {
    ready.push_back(&p);
    at_hook.emplace_back(p.grad.data<float>(), p.grad.data<float>() + p.grad.numel());
  });
  for (int step = 0; step < 2; ++step) {  // the second backward reuses every buffer
    ready.clear();
    at_hook.clear();
    Tensor labels(Shape{2}, DType::kI32);
    labels.data<int32_t>()[0] = 3 + step;
    labels.data<int32_t>()[1] = 8 - step;
    SoftmaxCrossEntropyLoss loss(&backend);
    const Tensor images = RandomImages(2, 10 + step);  // backward reads it again
    loss.Forward(model.Forward(Mode::kTrain, images), labels);
    model.Backward(loss.Backward());

    ASSERT_EQ(ready.size(), model.parameters().size()) << "step " << step;
    absl::flat_hash_map<const Parameter*, int> seen;
    for (size_t i = 0; i < ready.size(); ++i) {
      EXPECT_EQ(++seen[ready[i]], 1) << "a parameter reported twice, step " << step;
      if (i > 0) {
        EXPECT_LE(layer_of.at(ready[i]), layer_of.at(ready[i - 1])) << "not last layer first";
      }
      // Nothing changed the gradient after the hook said it was final.
      const Tensor& grad = ready[i]->grad;
      ASSERT_EQ(at_hook[i].size(), static_cast<size_t>(grad.numel()));
      EXPECT_EQ(std::memcmp(at_hook[i].data(), grad.data<float>(), grad.nbytes()), 0)
          << "layer " << layer_of.at(ready[i]) << ", step " << step;
    }
  }
}

// Backward's gradients, routed through the planned buffers (an output read by three layers,
// whose gradients are summed, the first sum in a buffer of its own and the next in place; a
// sum handing its gradient on; a concatenation; a batch norm whose input's memory serves
// other tensors once read), equal the loss's central differences, on the reference backend
// in double precision.
TEST(ModelGradientTest, BackwardEqualsCentralDifferencesThroughSumsAndBranches) {
  ReferenceBackend backend;
  ModelBuilder b(&backend, "branches", Shape{2, 5, 5});
  b.Conv2d("c1", 3, 3, 1, 1).BatchNorm("bn").Relu("r1");
  const int r1 = b.current();
  b.Conv2d("c2", 3, 3, 1, 1);
  const int c2 = b.current();
  b.From(r1).Conv2d("c3", 2, 1, 1, 0);
  const int c3 = b.current();
  b.From(c2).Add("add", r1);
  const int add = b.current();
  b.Concat("cat", {add, c3}).GlobalAvgPool("pool").Linear("fc", 4);
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  Model& model = **built;
  model.InitParameters(5);
  Tensor images(Shape{3, 2, 5, 5}, DType::kF64);
  Rng rng(6);
  for (double& v : images.span<double>()) v = rng.Uniform(-1, 1);
  Tensor labels(Shape{3}, DType::kI32);
  for (int i = 0; i < 3; ++i) labels.data<int32_t>()[i] = i;
  SoftmaxCrossEntropyLoss loss(&backend);
  auto loss_now = [&] { return loss.Forward(model.Forward(Mode::kTrain, images), labels); };

  loss_now();
  model.Backward(loss.Backward());
  std::vector<std::vector<double>> grads;
  for (const Parameter* p : model.parameters()) {
    grads.emplace_back(p->grad.data<double>(), p->grad.data<double>() + p->grad.numel());
  }
  const double h = 1e-6;
  for (size_t k = 0; k < model.parameters().size(); ++k) {
    Parameter& p = *model.parameters()[k];
    for (int64_t e = 0; e < p.value.numel(); e += std::max<int64_t>(1, p.value.numel() / 5)) {
      double& w = p.value.data<double>()[e];
      const double kept = w;
      w = kept + h;
      const double up = loss_now();
      w = kept - h;
      const double down = loss_now();
      w = kept;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(grads[k][e], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << p.name << "[" << e << "]";
    }
  }
}

}  // namespace
}  // namespace cohort
