#include "trainer/nn/loss.h"

#include <cmath>

#include "gtest/gtest.h"
#include "trainer/ops/reference/reference_backend.h"

namespace cohort {
namespace {

// logits (2, 3): rows (0, 0, 0) and (1, 2, 3); labels 2 and 0.
Tensor Logits() {
  Tensor t(Shape{2, 3}, DType::kF64);
  const double v[] = {0, 0, 0, 1, 2, 3};
  for (int i = 0; i < 6; ++i) t.data<double>()[i] = v[i];
  return t;
}

Tensor Labels() {
  Tensor t(Shape{2}, DType::kI32);
  t.data<int32_t>()[0] = 2;
  t.data<int32_t>()[1] = 0;
  return t;
}

TEST(SoftmaxCrossEntropyLossTest, ForwardIsTheMeanCrossEntropy) {
  ReferenceBackend ref;
  SoftmaxCrossEntropyLoss loss(&ref);
  const double row1 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 1.0;
  EXPECT_NEAR(loss.Forward(Logits(), Labels()), (std::log(3.0) + row1) / 2, 1e-12);
}

// Compute leaves the loss where the backend put it; ReadLoss, even after Backward, gives what
// Forward would have, and the gradient is the same.
TEST(SoftmaxCrossEntropyLossTest, ComputeThenReadLossIsForward) {
  ReferenceBackend ref;
  const Tensor logits = Logits(), labels = Labels();
  SoftmaxCrossEntropyLoss eager(&ref), deferred(&ref);
  const double want = eager.Forward(logits, labels);
  const Tensor& want_grad = eager.Backward();
  deferred.Compute(logits, labels);
  const Tensor& grad = deferred.Backward();
  EXPECT_EQ(deferred.ReadLoss(), want);
  ASSERT_EQ(grad.numel(), want_grad.numel());
  for (int64_t i = 0; i < grad.numel(); ++i) {
    EXPECT_EQ(grad.data<double>()[i], want_grad.data<double>()[i]) << i;
  }
}

}  // namespace
}  // namespace cohort
