#include "trainer/ops/click_model_ops.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/ops/op_testing.h"

namespace cohort {
namespace {

using testing::TensorOf;

TEST(DotInteractionTest, EveryPairOnceInDlrmsOrderAndItsGradient) {
  std::unique_ptr<Op> op = MakeHostDotInteraction();
  // One sample, 3 vectors of 2: a=(1,2), b=(3,4), c=(5,6).
  const Tensor x = TensorOf<float>({1, 3, 2}, {1, 2, 3, 4, 5, 6});
  ASSERT_EQ((*op->OutputShapes({x.shape()}))[0], (Shape{1, 3}));
  Tensor y(Shape{1, 3});
  op->Forward(Mode::kTrain, {&x}, {&y});
  // (b·a, c·a, c·b)
  EXPECT_EQ(std::vector<float>(y.span<float>().begin(), y.span<float>().end()),
            (std::vector<float>{11, 17, 39}));
  const Tensor dy = TensorOf<float>({1, 3}, {1, 10, 100});
  Tensor dx(Shape{1, 3, 2});
  op->Backward({&x}, {&y}, {&dy}, {&dx});
  // da = 1·b + 10·c; db = 1·a + 100·c; dc = 10·a + 100·b
  EXPECT_EQ(std::vector<float>(dx.span<float>().begin(), dx.span<float>().end()),
            (std::vector<float>{53, 64, 501, 602, 310, 420}));
  EXPECT_FALSE(op->OutputShapes({{4, 1, 3}}).ok());  // one vector: no pair
}

TEST(BinaryCrossEntropyTest, IsTheMeanLogLossOfTheSigmoidAndStaysFiniteFarOut) {
  std::unique_ptr<Op> op = MakeHostBinaryCrossEntropy();
  const Tensor z = TensorOf<double>({4}, {0.0, 2.0, -3.0, 800.0});
  const Tensor labels = TensorOf<int32_t>({4}, {1, 0, 0, 0});
  Tensor loss(Shape{}, DType::kF64);
  op->Forward(Mode::kTrain, {&z, &labels}, {&loss});
  const auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double want =
      (-std::log(0.5) - std::log(1 - sigmoid(2.0)) - std::log(1 - sigmoid(-3.0)) + 800.0) / 4;
  EXPECT_NEAR(loss.data<double>()[0], want, 1e-12);
  const Tensor one = TensorOf<double>({}, {1.0});
  Tensor dz(Shape{4}, DType::kF64);
  op->Backward({&z, &labels}, {&loss}, {&one}, {&dz, nullptr});
  EXPECT_NEAR(dz.data<double>()[0], (0.5 - 1) / 4, 1e-15);
  EXPECT_NEAR(dz.data<double>()[1], sigmoid(2.0) / 4, 1e-15);
  EXPECT_NEAR(dz.data<double>()[3], 1.0 / 4, 1e-15);
  EXPECT_FALSE(op->OutputShapes({{4}, {5}}).ok());
}

}  // namespace
}  // namespace cohort
