// Proves the CPU fast path runs oneDNN primitives: a LeNet training step under ONEDNN_VERBOSE
// must execute every primitive kind it needs, forward and backward. Its own test binary,
// because oneDNN reads ONEDNN_VERBOSE once, at its first use.

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/models/models.h"
#include "trainer/nn/loss.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

TEST(OnednnVerboseTest, LenetStepRunsOnednnPrimitives) {
  ASSERT_EQ(setenv("ONEDNN_VERBOSE", "1", 1), 0);
  OnednnBackend dnn;
  auto model = *BuildModel("lenet", &dnn, Shape{1, 28, 28}, 10);
  model->InitParameters(1);
  Tensor x(Shape{8, 1, 28, 28});
  Tensor labels(Shape{8}, DType::kI32);
  Rng rng(4);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(10));
  SoftmaxCrossEntropyLoss loss(&dnn);

  ::testing::internal::CaptureStdout();
  loss.Forward(model->Forward(Mode::kTrain, x), labels);
  model->Backward(loss.Backward());
  const std::string log = ::testing::internal::GetCapturedStdout();

  for (const char* kind :
       {"convolution", "pooling", "eltwise", "inner_product", "softmax"}) {
    for (const char* prop : {"forward_training", "backward"}) {
      // The loss's backward is softmax − one-hot on the saved log-probabilities, no primitive.
      if (std::string(kind) == "softmax" && std::string(prop) == "backward") continue;
      // A prefix: oneDNN 2.6 reports pooling_v2 and softmax_v2 (log-softmax runs as the latter).
      const std::string needle = std::string(",exec,cpu,") + kind;
      bool found = false;
      for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) {
        const size_t eol = log.find('\n', at);
        if (log.substr(at, eol - at).find(prop) != std::string::npos) found = true;
      }
      EXPECT_TRUE(found) << "no " << kind << " " << prop << " primitive ran; log:\n" << log;
    }
  }
}

}  // namespace
}  // namespace cohort
