#include "trainer/gpu/step_graph.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/gpu/device_sgd.h"
#include "trainer/models/models.h"
#include "trainer/nn/loss.h"

namespace cohort::cuda {
namespace {

// A model training on one batch already on the GPU.
struct Trainee {
  Trainee(CudaBackend* gpu, const std::string& name, const Shape& sample)
      : model(*BuildModel(name, gpu, sample, 10)), loss(gpu) {
    model->InitParameters(3);
    sgd = std::make_unique<DeviceSgd>(gpu, model->parameters(), SgdOptions{0.9f, 1e-4f});
  }
  void Step(const Tensor& x, const Tensor& y) {
    loss.Compute(model->Forward(Mode::kTrain, x), y);
    model->Backward(loss.Backward());
    sgd->Step(0.01f);
  }

  std::unique_ptr<Model> model;
  SoftmaxCrossEntropyLoss loss;
  std::unique_ptr<DeviceSgd> sgd;
};

Tensor Download(const Tensor& device) {
  Tensor host(Shape{0}, device.dtype());
  host.CopyFrom(device);
  return host;
}

// Steps launched from the captured graph give the eager steps' parameters bit for bit
// (convolution algorithms chosen by number, so both models take the same), and the step's
// work is queued once: LeNet, and ResNet-20 with its sums of gradients.
TEST(StepGraphTest, GraphStepsEqualEagerStepsBitForBit) {
  for (const auto& [name, sample] : {std::pair<std::string, Shape>{"lenet", Shape{1, 28, 28}},
                                     {"resnet20", Shape{3, 32, 32}}}) {
    SCOPED_TRACE(name);
    auto gpu = CudaBackend::Create({0, Precision::kFp32, true, /*deterministic=*/true});
    if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
    Tensor host_images(Shape{16, sample[0], sample[1], sample[2]});
    Tensor host_labels(Shape{16}, DType::kI32);
    Rng rng(4);
    for (float& v : host_images.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
    for (int32_t& l : host_labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(10));
    Tensor images(Shape{0}, (*gpu)->dtype(), (*gpu)->allocator());
    Tensor labels(Shape{0}, DType::kI32, (*gpu)->allocator());
    const Tensor& x = (*gpu)->ImportImages(host_images, &images);
    const Tensor& y = (*gpu)->ImportLabels(host_labels, &labels);

    Trainee eager(gpu->get(), name, sample), graphed(gpu->get(), name, sample);
    eager.Step(x, y);  // cudnnFind, the model's plan, every buffer
    graphed.Step(x, y);
    StepGraph graph((*gpu)->context());
    int queued = 0;
    for (int step = 0; step < 3; ++step) {
      eager.Step(x, y);
      ASSERT_TRUE(graph.Run([&] {
        ++queued;
        graphed.Step(x, y);
      }).ok());
    }
    EXPECT_EQ(queued, 1);
    EXPECT_TRUE(graph.captured());
    EXPECT_EQ(eager.loss.ReadLoss(), graphed.loss.ReadLoss());
    for (size_t i = 0; i < eager.model->parameters().size(); ++i) {
      const Tensor a = Download(eager.model->parameters()[i]->value);
      const Tensor b = Download(graphed.model->parameters()[i]->value);
      ASSERT_EQ(a.nbytes(), b.nbytes());
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0)
          << eager.model->parameters()[i]->name;
    }
  }
}

// A step that waits for the GPU cannot be captured: Run says so, and nothing was launched.
TEST(StepGraphTest, AStepThatWaitsIsRefused) {
  auto gpu = CudaBackend::Create({0, Precision::kFp32, true});
  if (!gpu.ok()) GTEST_SKIP() << "needs a GPU: " << gpu.status();
  CudaContext* ctx = (*gpu)->context();
  StepGraph graph(ctx);
  const absl::Status s = graph.Run([&] { cudaStreamSynchronize(ctx->stream()); });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("could not be captured"), std::string::npos) << s;
  EXPECT_FALSE(graph.captured());
}

}  // namespace
}  // namespace cohort::cuda
