#include "trainer/models/models.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <tuple>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/nn/loss.h"
#include "trainer/ops/cpu/onednn_backend.h"
#include "trainer/ops/op_testing.h"
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
  EXPECT_EQ(unknown.status().message(),
            "unknown model 'resnet9000'; known models: lenet, mlp, resnet20, resnet32, resnet44, "
            "resnet56, resnet110, resnet50, googlenet");
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

// One training step of a model on oneDNN equals the same step on the reference: loss, every
// parameter's gradient and the state (running statistics) after it. build makes the model on a
// backend.
void ExpectStepMatchesReference(
    const std::string& name,
    const std::function<absl::StatusOr<std::unique_ptr<Model>>(Backend*)>& build,
    const Shape& sample, int64_t batch) {
  OnednnBackend dnn;
  ReferenceBackend ref;
  auto built = build(&dnn);
  auto built_ref = build(&ref);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_TRUE(built_ref.ok()) << built_ref.status();
  Model& m = **built;
  Model& r = **built_ref;
  m.InitParameters(3);
  r.InitParameters(3);
  std::vector<int64_t> dims{batch};
  dims.insert(dims.end(), sample.dims().begin(), sample.dims().end());
  Tensor x(Shape(dims), DType::kF32);
  Tensor labels(Shape{batch}, DType::kI32);
  Rng rng(9);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(m.num_classes()));
  Tensor x_ref = ConvertTo(x, DType::kF64);

  SoftmaxCrossEntropyLoss loss(&dnn), loss_ref(&ref);
  const double l = loss.Forward(m.Forward(Mode::kTrain, x), labels);
  const double l_ref = loss_ref.Forward(r.Forward(Mode::kTrain, x_ref), labels);
  EXPECT_NEAR(l, l_ref, 1e-5 * std::abs(l_ref)) << name;
  m.Backward(loss.Backward());
  r.Backward(loss_ref.Backward());
  for (size_t i = 0; i < m.parameters().size(); ++i) {
    EXPECT_LT(testing::NormalizedMaxError(m.parameters()[i]->grad, r.parameters()[i]->grad), 1e-4)
        << name << " " << m.parameters()[i]->name;
  }
  ASSERT_EQ(m.state().size(), r.state().size());
  for (size_t i = 0; i < m.state().size(); ++i) {
    EXPECT_LT(testing::NormalizedMaxError(*m.state()[i].value, *r.state()[i].value), 1e-5)
        << name << " " << m.state()[i].name;
  }
}

void ExpectStepMatchesReference(const std::string& name, const Shape& sample, int64_t batch) {
  ExpectStepMatchesReference(
      name, [&](Backend* backend) { return BuildModel(name, backend, sample, 10); }, sample,
      batch);
}

TEST(ModelsTest, LenetStepMatchesReference) { ExpectStepMatchesReference("lenet", {1, 28, 28}, 4); }

// Residual blocks: gradients of block inputs are summed over the two paths.
TEST(ModelsTest, Resnet20StepMatchesReference) {
  ExpectStepMatchesReference("resnet20", {3, 16, 16}, 4);
}

// Activations held blocked from op to op give the step the plain layout gives: the loss and
// the step's whole gradient (every parameter's, against the largest element of any) within
// 1e-5, each parameter's within 1e-4 of its own largest, and the running statistics, within
// fp32 rounding (the two layouts sum batch norm's statistics in different orders).
TEST(ModelsTest, Resnet20StepInBlockedLayoutsEqualsThePlainPath) {
  OnednnBackend blocked, plain(0, ActivationLayout::kPlain);
  ASSERT_GT(blocked.channel_block(), 0);
  auto m = *BuildModel("resnet20", &blocked, Shape{3, 32, 32}, 10);
  auto r = *BuildModel("resnet20", &plain, Shape{3, 32, 32}, 10);
  m->InitParameters(5);
  r->InitParameters(5);
  Tensor x(Shape{8, 3, 32, 32});
  Tensor labels(Shape{8}, DType::kI32);
  Rng rng(6);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(10));
  SoftmaxCrossEntropyLoss loss(&blocked), loss_plain(&plain);
  const double l = loss.Forward(m->Forward(Mode::kTrain, x), labels);
  const double l_plain = loss_plain.Forward(r->Forward(Mode::kTrain, x), labels);
  EXPECT_NEAR(l, l_plain, 1e-5 * std::abs(l_plain));
  m->Backward(loss.Backward());
  r->Backward(loss_plain.Backward());
  ASSERT_EQ(m->parameters().size(), r->parameters().size());
  double diff = 0, largest = 0;
  for (size_t i = 0; i < m->parameters().size(); ++i) {
    const Tensor &g = m->parameters()[i]->grad, &want = r->parameters()[i]->grad;
    EXPECT_LT(testing::NormalizedMaxError(g, want), 1e-4) << m->parameters()[i]->name;
    for (int64_t k = 0; k < g.numel(); ++k) {
      diff = std::max(diff, std::abs(double{g.data<float>()[k]} - want.data<float>()[k]));
      largest = std::max(largest, std::abs(double{want.data<float>()[k]}));
    }
  }
  EXPECT_LT(diff / largest, 1e-5);
  for (size_t i = 0; i < m->state().size(); ++i) {
    EXPECT_LT(testing::NormalizedMaxError(*m->state()[i].value, *r->state()[i].value), 1e-5)
        << m->state()[i].name;
  }
}

TEST(ModelsTest, ResnetParameterCountsMatchPublishedOnes) {
  OnednnBackend dnn;
  // He et al. 2016 (CIFAR, option A shortcuts, 10 classes).
  const std::vector<std::pair<std::string, int64_t>> cifar = {{"resnet20", 269722},
                                                              {"resnet32", 464154},
                                                              {"resnet44", 658586},
                                                              {"resnet56", 853018},
                                                              {"resnet110", 1727962}};
  for (const auto& [name, count] : cifar) {
    auto model = BuildModel(name, &dnn, Shape{3, 32, 32}, 10);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->num_parameter_elements(), count) << name;
    EXPECT_EQ(ModelImageSize(name), 32);
  }
  auto r50 = BuildModel("resnet50", &dnn, Shape{3, 224, 224}, 1000);
  ASSERT_TRUE(r50.ok()) << r50.status();
  EXPECT_EQ((*r50)->num_parameter_elements(), 25557032);  // torchvision's resnet50
  EXPECT_EQ((*r50)->parameters().size(), 161u);
  EXPECT_EQ((*r50)->state().size(), 2u * 53);  // 53 batch norms
  EXPECT_EQ(ModelImageSize("resnet50"), 224);
  EXPECT_EQ(ModelImageSize("lenet"), 0);
}

TEST(ModelsTest, BenchmarkSamplesFollowTheModelsDatasets) {
  EXPECT_EQ(BenchmarkSampleFor("lenet").shape, (Shape{1, 28, 28}));
  EXPECT_EQ(BenchmarkSampleFor("resnet56").shape, (Shape{3, 32, 32}));
  EXPECT_EQ(BenchmarkSampleFor("resnet56").num_classes, 10);
  EXPECT_EQ(BenchmarkSampleFor("resnet50").shape, (Shape{3, 224, 224}));
  EXPECT_EQ(BenchmarkSampleFor("resnet50").num_classes, 1000);
  EXPECT_EQ(BenchmarkSampleFor("googlenet").shape, (Shape{3, 224, 224}));
  EXPECT_EQ(BenchmarkSampleFor("googlenet").num_classes, 1000);
}

// Every model builds at its benchmark size and gives logits for its classes.
TEST(ModelsTest, EveryModelBuildsForItsBenchmarkSample) {
  OnednnBackend dnn;
  for (const std::string& name : ModelNames()) {
    const BenchmarkSample sample = BenchmarkSampleFor(name);
    auto model = BuildModel(name, &dnn, sample.shape, sample.num_classes);
    ASSERT_TRUE(model.ok()) << name << ": " << model.status();
    EXPECT_EQ((*model)->num_classes(), sample.num_classes) << name;
  }
}

// An Inception-like block: one output read by three branches (their gradients summed), the
// branches concatenated (the gradient split again), batch norm with GoogLeNet's eps and
// ceil-mode pooling whose last windows hang over the edge.
TEST(ModelsTest, ConcatenatedBranchesStepMatchesReference) {
  const Shape sample{3, 9, 9};
  ExpectStepMatchesReference(
      "branches",
      [&](Backend* backend) {
        ModelBuilder b(backend, "branches", sample);
        b.Conv2d("stem", 4, 3, 1, 1, false).BatchNorm("stem_bn", 1e-3f).Relu("stem_relu");
        const int x = b.current();
        b.Conv2d("branch1", 2, 1, 1, 0);
        const int branch1 = b.current();
        b.From(x).MaxPool2d("branch2_pool", 3, 1, 1, /*ceil_mode=*/true);
        b.Conv2d("branch2", 3, 1, 1, 0);
        const int branch2 = b.current();
        b.From(x).Conv2d("branch3", 2, 3, 1, 1);
        b.Concat("cat", {branch1, branch2, b.current()});
        b.MaxPool2d("pool", 2, 2, 0, /*ceil_mode=*/true).GlobalAvgPool("avgpool").Linear("fc", 5);
        return b.Build();
      },
      sample, 4);
}

// A ReLU merges into the batch norm or sum before it only where it is that output's one reader:
// here the first batch norm is read by its ReLU and by the sum, so only the sum takes its
// ReLU (and the second batch norm its own), and the layers after read the merged ones.
TEST(ModelsTest, ReluMergesOnlyIntoAnOutputItAloneReads) {
  const Shape sample{3, 8, 8};
  auto build = [&](Backend* backend) {
    ModelBuilder b(backend, "fused", sample);
    b.Conv2d("conv", 16, 3, 1, 1, false).BatchNorm("bn");
    const int bn = b.current();
    b.Relu("relu");
    const int relu = b.current();
    b.From(bn).Add("sum", relu).Relu("sum_relu");
    b.Conv2d("conv2", 16, 3, 1, 1, false).BatchNorm("bn2").Relu("bn2_relu");
    b.GlobalAvgPool("avgpool").Linear("fc", 5);
    return b.Build();
  };
  OnednnBackend dnn;
  ReferenceBackend ref;
  auto fused = build(&dnn);
  auto plain = build(&ref);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  std::vector<std::string> names;
  for (int i = 0; i < (*fused)->num_layers(); ++i) names.push_back((*fused)->layer(i).name());
  EXPECT_EQ(names, (std::vector<std::string>{"conv", "bn", "relu", "sum", "conv2", "bn2",
                                             "avgpool", "fc"}));
  EXPECT_EQ((*plain)->num_layers(), 10);
  ExpectStepMatchesReference("fused", build, sample, 4);
}

// GoogLeNet's forward on both backends. (A training step's gradients are held to the reference
// op by op and in the block above: at the sizes a test affords, GoogLeNet's last batch norms see
// a handful of values per channel, where fp32 and double part at ReLU kinks.)
TEST(ModelsTest, GooglenetEvalLogitsMatchReference) {
  OnednnBackend dnn;
  ReferenceBackend ref;
  auto m = *BuildModel("googlenet", &dnn, Shape{3, 32, 32}, 10);
  auto r = *BuildModel("googlenet", &ref, Shape{3, 32, 32}, 10);
  m->InitParameters(3);
  r->InitParameters(3);
  Tensor x(Shape{2, 3, 32, 32});
  Rng rng(9);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  const Tensor& logits = m->Forward(Mode::kEval, x);
  const Tensor& logits_ref = r->Forward(Mode::kEval, ConvertTo(x, DType::kF64));
  EXPECT_LT(testing::NormalizedMaxError(logits, logits_ref), 1e-5);
}

TEST(ModelsTest, GooglenetHasTorchvisionsParametersAndNames) {
  OnednnBackend dnn;
  auto model = BuildModel("googlenet", &dnn, Shape{3, 224, 224}, 1000);
  ASSERT_TRUE(model.ok()) << model.status();
  // torchvision.models.googlenet(aux_logits=False, init_weights=False): 173 parameter tensors,
  // 57 batch norms.
  EXPECT_EQ((*model)->num_parameter_elements(), 6624904);
  EXPECT_EQ((*model)->parameters().size(), 173u);
  EXPECT_EQ((*model)->state().size(), 2u * 57);
  EXPECT_EQ(ModelImageSize("googlenet"), 224);
  std::vector<std::string> names;
  for (const StateTensor& t : (*model)->ExportedTensors()) names.push_back(t.name);
  ASSERT_EQ(names.size(), 173u + 2 * 57);
  const std::vector<std::string> head = {
      "conv1.conv.weight", "conv1.bn.weight", "conv1.bn.bias", "conv1.bn.running_mean",
      "conv1.bn.running_var", "conv2.conv.weight"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + head.size()), head);
  // inception3a's convolutions in torchvision's order (conv1..conv3 take 3 × 5 tensors).
  std::vector<std::string> block;
  for (size_t i = 15; i < names.size() && names[i].rfind("inception3a.", 0) == 0; i += 5) {
    block.push_back(names[i]);
  }
  EXPECT_EQ(block, (std::vector<std::string>{
                       "inception3a.branch1.conv.weight", "inception3a.branch2.0.conv.weight",
                       "inception3a.branch2.1.conv.weight", "inception3a.branch3.0.conv.weight",
                       "inception3a.branch3.1.conv.weight", "inception3a.branch4.1.conv.weight"}));
  EXPECT_EQ(names[names.size() - 2], "fc.weight");
  EXPECT_EQ(names.back(), "fc.bias");
  EXPECT_EQ((*model)->parameters()[171]->value.shape(), (Shape{1000, 1024}));  // fc.weight
}

// Plain SGD on one batch of 3x32x32 images drives GoogLeNet's training loss down: the
// gradients through the concatenations and pools point downhill.
TEST(ModelsTest, GooglenetLearnsAFixedBatch) {
  OnednnBackend dnn;
  auto model = *BuildModel("googlenet", &dnn, Shape{3, 32, 32}, 4);
  model->InitParameters(5);
  Tensor x(Shape{8, 3, 32, 32});
  Tensor labels(Shape{8}, DType::kI32);
  Rng rng(11);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int64_t i = 0; i < 8; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(i % 4);
  SoftmaxCrossEntropyLoss loss(&dnn);
  std::vector<double> losses;
  for (int step = 0; step < 8; ++step) {
    losses.push_back(loss.Forward(model->Forward(Mode::kTrain, x), labels));
    model->Backward(loss.Backward());
    for (Parameter* p : model->parameters()) {
      for (int64_t i = 0; i < p->value.numel(); ++i) {
        p->value.data<float>()[i] -= 0.05f * p->grad.data<float>()[i];
      }
    }
  }
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << losses.front() << " -> " << losses.back();
}

TEST(ModelsTest, Resnet20ExportsTorchNamesInModelOrder) {
  OnednnBackend dnn;
  auto model = *BuildModel("resnet20", &dnn, Shape{1, 32, 32}, 10);
  std::vector<std::string> names;
  for (const StateTensor& t : model->ExportedTensors()) names.push_back(t.name);
  ASSERT_EQ(names.size(), 1 + 4 + 9 * (1 + 4 + 1 + 4) + 2u);
  const std::vector<std::string> head = {"conv1.weight",         "bn1.weight",
                                         "bn1.bias",             "bn1.running_mean",
                                         "bn1.running_var",      "layer1.0.conv1.weight",
                                         "layer1.0.bn1.weight",  "layer1.0.bn1.bias",
                                         "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var",
                                         "layer1.0.conv2.weight"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + head.size()), head);
  EXPECT_EQ(names[names.size() - 2], "fc.weight");
  EXPECT_EQ(names.back(), "fc.bias");
  // Fresh running statistics are mean 0, variance 1, as in PyTorch.
  EXPECT_EQ(model->state()[0].value->data<float>()[0], 0.0f);
  EXPECT_EQ(model->state()[1].value->data<float>()[0], 1.0f);
  model->InitParameters(1);
  EXPECT_EQ(model->parameters()[1]->value.data<float>()[0], 1.0f);  // bn1.weight
}

TEST(ModelsTest, BuilderRejectsUnusedBranches) {
  OnednnBackend dnn;
  ModelBuilder b(&dnn, "dangling", Shape{1, 8, 8});
  b.Conv2d("a", 2, 3, 1, 1);
  const int a = b.current();
  b.Relu("unused").From(a).Flatten("flatten").Linear("fc", 3);
  auto model = b.Build();
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("layer unused is never used"), std::string::npos)
      << model.status();
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


// Each layer's output shape for a batch of `input` (N, C, H, W).
std::vector<Shape> OutputShapes(Model& m, const Shape& input) {
  std::vector<Shape> shapes;
  for (int i = 0; i < m.num_layers(); ++i) {
    std::vector<Shape> xs;
    for (int in : m.layer(i).inputs()) xs.push_back(in == Layer::kModelInput ? input : shapes[in]);
    shapes.push_back(*m.layer(i).OutputShape(xs));
  }
  return shapes;
}

// A training step's peak of host memory on the CPU backend (every tensor, and oneDNN's
// workspaces and staged arguments, come from the counting CPU allocator) stays within what the
// model's shapes say it needs: the parameters and their gradients, every layer's output (kept
// for backward), four gradients between layers at once (a residual block's pending one, its
// branch's current and next, their sum), the largest weight staged in another layout, and a
// byte per activation element for workspaces (ReLU masks, pooling argmaxes). Without the plan
// every gradient between layers had a buffer of its own: about the outputs' bytes again.
// Evaluation keeps only what the next layers read.
TEST(ModelsTest, StepPeakMemoryStaysWithinTheBoundOfTheModelsShapes) {
  for (const auto& [name, sample, batch] :
       {std::tuple<std::string, Shape, int64_t>{"resnet20", Shape{3, 32, 32}, 32},
        {"resnet50", Shape{3, 128, 128}, 4}}) {
    OnednnBackend dnn;
    const int64_t before = CpuAllocator()->memory_use().in_use;
    CpuAllocator()->ResetPeak();
    auto m = *BuildModel(name, &dnn, sample, 10);
    m->InitParameters(1);
    std::vector<int64_t> dims{batch};
    dims.insert(dims.end(), sample.dims().begin(), sample.dims().end());
    Tensor x{Shape(dims)};
    for (float& v : x.span<float>()) v = 0.5f;
    Tensor labels(Shape{batch}, DType::kI32);
    labels.SetZero();
    SoftmaxCrossEntropyLoss loss(&dnn);
    for (int step = 0; step < 2; ++step) {
      loss.Forward(m->Forward(Mode::kTrain, x), labels);
      m->Backward(loss.Backward());
    }
    const int64_t peak = CpuAllocator()->memory_use().peak - before;

    int64_t outputs = 0, largest = 0, largest_weight = 0;
    for (const Shape& s : OutputShapes(*m, Shape(dims))) {
      outputs += s.numel() * 4;
      largest = std::max(largest, s.numel() * 4);
    }
    for (const Parameter* p : m->parameters()) {
      largest_weight = std::max(largest_weight, p->value.numel() * 4);
    }
    const int64_t params = m->num_parameter_elements() * 4;
    const int64_t bound = 2 * params + outputs + 4 * largest + largest_weight + outputs / 4;
    EXPECT_LE(m->planned_bytes(), outputs + 4 * largest) << name;
    EXPECT_LE(peak, bound) << name;
    std::printf("%s, batch %ld: step peak %.1f MiB (bound %.1f): parameters and gradients %.1f, "
                "planned %.1f, outputs %.1f\n",
                name.c_str(), static_cast<long>(batch), peak / 1048576.0, bound / 1048576.0,
                2 * params / 1048576.0, m->planned_bytes() / 1048576.0, outputs / 1048576.0);

    m->Forward(Mode::kEval, x);
    EXPECT_LE(m->planned_bytes(), 3 * largest) << name;
  }
}

}  // namespace
}  // namespace cohort
