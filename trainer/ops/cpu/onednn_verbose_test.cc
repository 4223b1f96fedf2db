// Proves the CPU fast path runs oneDNN primitives: a LeNet training step under ONEDNN_VERBOSE
// must execute every primitive kind it needs, forward and backward; and that activations held
// blocked are never reordered in a ResNet step. Its own test binary, because oneDNN reads
// ONEDNN_VERBOSE once, at its first use.

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/models/models.h"
#include "trainer/nn/loss.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

// oneDNN's verbose log of one training step of `name` on (batch, sample) images.
std::string StepLog(OnednnBackend& dnn, const std::string& name, const Shape& sample,
                    int64_t batch) {
  EXPECT_EQ(setenv("ONEDNN_VERBOSE", "1", 1), 0);
  auto model = *BuildModel(name, &dnn, sample, 10);
  model->InitParameters(1);
  std::vector<int64_t> dims{batch};
  dims.insert(dims.end(), sample.dims().begin(), sample.dims().end());
  Tensor x{Shape(dims)};
  Tensor labels(Shape{batch}, DType::kI32);
  Rng rng(4);
  for (float& v : x.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(10));
  SoftmaxCrossEntropyLoss loss(&dnn);
  ::testing::internal::CaptureStdout();
  loss.Forward(model->Forward(Mode::kTrain, x), labels);
  model->Backward(loss.Backward());
  return ::testing::internal::GetCapturedStdout();
}

TEST(OnednnVerboseTest, LenetStepRunsOnednnPrimitives) {
  OnednnBackend dnn;
  const std::string log = StepLog(dnn, "lenet", Shape{1, 28, 28}, 8);

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

// Reorders in a step whose problem has the batch (7, a size no weight of ResNet-20 has) as its
// first dimension: an activation's or its gradient's.
int ActivationReorders(const std::string& log) {
  int count = 0;
  for (size_t at = log.find(",exec,cpu,reorder,"); at != std::string::npos;
       at = log.find(",exec,cpu,reorder,", at + 1)) {
    const std::string line = log.substr(at, log.find('\n', at) - at);
    const size_t dims = line.rfind(',', line.rfind(',') - 1) + 1;
    if (line.compare(dims, 2, "7x") == 0) ++count;
  }
  return count;
}

// Held blocked from one op to the next, no activation of a ResNet step is reordered; plain,
// every convolution reorders its input and output, and their gradients.
TEST(OnednnVerboseTest, BlockedActivationsAreNeverReorderedInAResnetStep) {
  OnednnBackend blocked;
  ASSERT_GT(blocked.channel_block(), 0);
  EXPECT_EQ(ActivationReorders(StepLog(blocked, "resnet20", Shape{3, 16, 16}, 7)), 0);
  OnednnBackend plain(0, ActivationLayout::kPlain);
  EXPECT_GT(ActivationReorders(StepLog(plain, "resnet20", Shape{3, 16, 16}, 7)), 50);
}

}  // namespace
}  // namespace cohort
