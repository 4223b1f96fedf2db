#include "trainer/models/models.h"

#include <cmath>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/nn/loss.h"
#include "trainer/ops/cpu/onednn_backend.h"
#include "trainer/ops/reference/reference_backend.h"

namespace cohort {
namespace {

TEST(ModelsTest, LenetParameterNamesAndShapes) {
  OnednnBackend dnn;
  auto model = BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::pair<std::string, Shape>> want = {
      {"conv1.weight", {6, 1, 5, 5}}, {"conv1.bias", {6}},  {"conv2.weight", {16, 6, 5, 5}},
      {"conv2.bias", {16}},           {"fc1.weight", {120, 400}}, {"fc1.bias", {120}},
      {"fc2.weight", {84, 120}},      {"fc2.bias", {84}},   {"fc3.weight", {10, 84}},
      {"fc3.bias", {10}}};
  const auto& params = (*model)->parameters();
  ASSERT_EQ(params.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(params[i]->name, want[i].first);
    EXPECT_EQ(params[i]->value.shape(), want[i].second) << want[i].first;
  }
  // LeNet-5 (ReLU, max pooling, padded 28x28 input): 61,706 parameters.
  EXPECT_EQ((*model)->num_parameter_elements(), 61706);
  EXPECT_EQ((*model)->num_classes(), 10);
}

TEST(ModelsTest, MlpAndErrors) {
  OnednnBackend dnn;
  auto mlp = BuildModel("mlp", &dnn, Shape{1, 28, 28}, 10);
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ((*mlp)->num_parameter_elements(), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  auto unknown = BuildModel("resnet9000", &dnn, Shape{1, 28, 28}, 10);
  EXPECT_EQ(unknown.status().message(), "unknown model 'resnet9000'; known models: lenet, mlp");
  auto tiny = BuildModel("lenet", &dnn, Shape{1, 6, 6}, 10);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("layer conv2"), std::string::npos) << tiny.status();
}

TEST(ModelsTest, InitIsSeededAndHeUniform) {
  OnednnBackend dnn;
  auto a = *BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  auto b = *BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  a->InitParameters(7);
  b->InitParameters(7);
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    const Tensor& va = a->parameters()[i]->value;
    const Tensor& vb = b->parameters()[i]->value;
    for (int64_t j = 0; j < va.numel(); ++j) ASSERT_EQ(va.data<float>()[j], vb.data<float>()[j]);
  }
  const Tensor& w = a->parameters()[2]->value;  // conv2.weight, fan_in 150
  const double bound = std::sqrt(6.0 / 150);
  double max_abs = 0;
  for (float v : w.span<float>()) max_abs = std::max(max_abs, std::abs(double(v)));
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.9 * bound);
  for (float v : a->parameters()[3]->value.span<float>()) EXPECT_EQ(v, 0.0f);  // conv2.bias
  b->InitParameters(8);
  EXPECT_NE(a->parameters()[0]->value.data<float>()[0], b->parameters()[0]->value.data<float>()[0]);
}

// A whole LeNet step on oneDNN equals the same step on the reference: logits, loss and every
// parameter's gradient.
TEST(ModelsTest, LenetStepMatchesReference) {
  OnednnBackend dnn;
  ReferenceBackend ref;
  auto m = *BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  auto r = *BuildModel("lenet", &ref, Shape{1, 28, 28}, 10);
  m->InitParameters(3);
  r->InitParameters(3);
  Tensor x(Shape{4, 1, 28, 28}, DType::kF32);
  Tensor labels(Shape{4}, DType::kI32);
  Rng rng(9);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(10));
  Tensor x_ref = ConvertTo(x, DType::kF64);

  SoftmaxCrossEntropyLoss loss(&dnn), loss_ref(&ref);
  const double l = loss.Forward(m->Forward(Mode::kTrain, x), labels);
  const double l_ref = loss_ref.Forward(r->Forward(Mode::kTrain, x_ref), labels);
  EXPECT_NEAR(l, l_ref, 1e-5 * std::abs(l_ref));
  m->Backward(loss.Backward());
  r->Backward(loss_ref.Backward());
  for (size_t i = 0; i < m->parameters().size(); ++i) {
    const Tensor& g = m->parameters()[i]->grad;
    const Tensor& g_ref = r->parameters()[i]->grad;
    double diff = 0, scale = 0;
    for (int64_t j = 0; j < g.numel(); ++j) {
      diff = std::max(diff, std::abs(g.data<float>()[j] - g_ref.data<double>()[j]));
      scale = std::max(scale, std::abs(g_ref.data<double>()[j]));
    }
    EXPECT_LT(diff / scale, 1e-4) << m->parameters()[i]->name;
  }
}

TEST(ModelsTest, HooksFireInLayerAndGradientOrder) {
  OnednnBackend dnn;
  auto m = *BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  m->InitParameters(1);
  std::vector<int> forward_order;
  std::vector<std::string> ready_order;
  std::vector<std::vector<float>> grads_at_ready;
  m->SetBeforeForwardHook([&](int i, Layer&) { forward_order.push_back(i); });
  m->SetGradientReadyHook([&](Parameter& p) {
    ready_order.push_back(p.name);
    grads_at_ready.emplace_back(p.grad.span<float>().begin(), p.grad.span<float>().end());
  });
  Tensor x(Shape{2, 1, 28, 28});
  Tensor labels(Shape{2}, DType::kI32);
  Rng rng(2);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  labels.data<int32_t>()[0] = 1;
  labels.data<int32_t>()[1] = 7;
  SoftmaxCrossEntropyLoss loss(&dnn);
  loss.Forward(m->Forward(Mode::kTrain, x), labels);
  m->Backward(loss.Backward());

  ASSERT_EQ(forward_order.size(), static_cast<size_t>(m->num_layers()));
  for (int i = 0; i < m->num_layers(); ++i) EXPECT_EQ(forward_order[i], i);
  const std::vector<std::string> want = {"fc3.weight", "fc3.bias", "fc2.weight", "fc2.bias",
                                         "fc1.weight", "fc1.bias", "conv2.weight", "conv2.bias",
                                         "conv1.weight", "conv1.bias"};
  EXPECT_EQ(ready_order, want);
  // When the hook fires the gradient is final: it equals the gradient after backward.
  for (size_t k = 0; k < want.size(); ++k) {
    for (Parameter* p : m->parameters()) {
      if (p->name != want[k]) continue;
      EXPECT_EQ(grads_at_ready[k], std::vector<float>(p->grad.span<float>().begin(),
                                                      p->grad.span<float>().end()))
          << p->name;
    }
  }
}

}  // namespace
}  // namespace cohort
