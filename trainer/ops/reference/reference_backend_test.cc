#include "trainer/ops/reference/reference_backend.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "trainer/ops/op_testing.h"

namespace cohort {
namespace {

using testing::OpCase;

class ReferenceOpTest : public ::testing::TestWithParam<OpCase> {};

// The reference backward is the definition the fast backends are held to, so it is checked
// against central differences on every coordinate, in double precision.
TEST_P(ReferenceOpTest, BackwardMatchesFiniteDifferences) {
  ReferenceBackend ref;
  for (uint64_t seed : {1, 2}) {
    EXPECT_LT(testing::FiniteDifferenceError(ref, GetParam(), seed, 1e-6, 0), 1e-7)
        << GetParam().label << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, ReferenceOpTest, ::testing::ValuesIn(testing::StandardOpCases()),
                         [](const auto& info) { return info.param.label; });

TEST(ReferenceOpValues, ConvMatchesHandComputedValues) {
  // x = 1..9 in a 3x3 image, a 2x2 kernel of ones, bias 0.5, no padding.
  ReferenceBackend ref;
  auto op = ref.Conv2d({1, 0});
  std::vector<Tensor> in;
  in.emplace_back(Shape{1, 1, 3, 3}, DType::kF64);
  in.emplace_back(Shape{1, 1, 2, 2}, DType::kF64);
  in.emplace_back(Shape{1}, DType::kF64);
  for (int i = 0; i < 9; ++i) in[0].data<double>()[i] = i + 1;
  for (int i = 0; i < 4; ++i) in[1].data<double>()[i] = 1;
  in[2].data<double>()[0] = 0.5;
  auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 2, 2}));
  EXPECT_DOUBLE_EQ(out[0].data<double>()[0], 1 + 2 + 4 + 5 + 0.5);
  EXPECT_DOUBLE_EQ(out[0].data<double>()[3], 5 + 6 + 8 + 9 + 0.5);
}

TEST(ReferenceOpValues, SoftmaxCrossEntropyOfUniformLogitsIsLogK) {
  ReferenceBackend ref;
  auto op = ref.SoftmaxCrossEntropy();
  std::vector<Tensor> in;
  in.emplace_back(Shape{3, 10}, DType::kF64);
  in.emplace_back(Shape{3}, DType::kI32);
  in[0].SetZero();
  for (int32_t& l : in[1].span<int32_t>()) l = 4;
  auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  EXPECT_NEAR(out[0].data<double>()[0], std::log(10.0), 1e-12);
}

TEST(ReferenceOpValues, BatchNormNormalisesEachChannel) {
  // Channel 0 holds 1, 3 (mean 2, biased variance 1); channel 1 holds 10, 10.
  ReferenceBackend ref;
  auto op = ref.BatchNorm({2, 0.0f, 0.5f});
  std::vector<Tensor> in;
  in.emplace_back(Shape{2, 2, 1, 1}, DType::kF64);
  in.emplace_back(Shape{2}, DType::kF64);
  in.emplace_back(Shape{2}, DType::kF64);
  const double x[] = {1, 10, 3, 10};  // (n, c) order
  for (int i = 0; i < 4; ++i) in[0].data<double>()[i] = x[i];
  in[1].data<double>()[0] = 2;  // gamma
  in[1].data<double>()[1] = 1;
  in[2].data<double>()[0] = 0.5;  // beta
  in[2].data<double>()[1] = -1;
  auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  const double* y = out[0].data<double>();
  EXPECT_DOUBLE_EQ(y[0], 2 * -1 + 0.5);
  EXPECT_DOUBLE_EQ(y[2], 2 * 1 + 0.5);
  // Channel 1 has zero variance and eps 0: only check the running statistics there.
  auto state = op->State();
  EXPECT_DOUBLE_EQ(state[0].value->data<double>()[0], 0.5 * 0 + 0.5 * 2);
  // Unbiased variance of {1, 3} is 2: 0.5 · 1 + 0.5 · 2.
  EXPECT_DOUBLE_EQ(state[1].value->data<double>()[0], 1.5);
  EXPECT_DOUBLE_EQ(state[0].value->data<double>()[1], 5);
}

TEST(ReferenceOpValues, SubsamplePadPlacesChannelsInTheMiddle) {
  ReferenceBackend ref;
  auto op = ref.SubsamplePad({2, 1});
  std::vector<Tensor> in;
  in.emplace_back(Shape{1, 1, 3, 3}, DType::kF64);
  for (int i = 0; i < 9; ++i) in[0].data<double>()[i] = i + 1;
  auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  ASSERT_EQ(out[0].shape(), (Shape{1, 3, 2, 2}));
  const std::vector<double> want{0, 0, 0, 0, 1, 3, 7, 9, 0, 0, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[0].data<double>()[i], want[i]) << i;
}

TEST(ReferenceOpValues, CeilModeMaxPoolKeepsTheWindowsPastTheEdge) {
  // 1..9 in a 3x3 image, 2x2 windows with stride 2: the floor size is 1x1, ceil_mode adds the
  // windows that hold only the last row or column.
  ReferenceBackend ref;
  auto op = ref.MaxPool2d({2, 2, 0, true});
  std::vector<Tensor> in;
  in.emplace_back(Shape{1, 1, 3, 3}, DType::kF64);
  for (int i = 0; i < 9; ++i) in[0].data<double>()[i] = i + 1;
  auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 2, 2}));
  const std::vector<double> want{5, 6, 8, 9};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[0].data<double>()[i], want[i]) << i;
}

TEST(ReferenceOpValues, ConcatStacksChannelsPerSampleAndSplitsTheGradient) {
  ReferenceBackend ref;
  auto op = ref.Concat();
  std::vector<Tensor> in;
  in.emplace_back(Shape{2, 1, 1, 2}, DType::kF64);
  in.emplace_back(Shape{2, 2, 1, 2}, DType::kF64);
  const std::vector<double> a{1, 2, 3, 4}, b{10, 11, 12, 13, 14, 15, 16, 17};
  std::copy(a.begin(), a.end(), in[0].data<double>());
  std::copy(b.begin(), b.end(), in[1].data<double>());
  auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  ASSERT_EQ(out[0].shape(), (Shape{2, 3, 1, 2}));
  const std::vector<double> want{1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[0].data<double>()[i], want[i]) << i;
  // The output's values as its gradient give each input back its own values.
  auto grads = testing::RunBackward(*op, in, out, out, DType::kF64);
  EXPECT_EQ(testing::NormalizedMaxError(grads[0], in[0]), 0.0);
  EXPECT_EQ(testing::NormalizedMaxError(grads[1], in[1]), 0.0);
}

TEST(ReferenceOpValues, DropoutKeepsAboutOneMinusPAndScales) {
  ReferenceBackend ref;
  auto op = ref.Dropout({0.25f, 3});
  std::vector<Tensor> in;
  in.emplace_back(Shape{100, 100}, DType::kF64);
  for (double& v : in[0].span<double>()) v = 1.0;
  auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  int kept = 0;
  for (double v : out[0].span<double>()) {
    if (v != 0) {
      EXPECT_DOUBLE_EQ(v, 1 / 0.75);
      ++kept;
    }
  }
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.02);
  // The next call draws a different mask; evaluation is the identity.
  auto again = testing::RunForward(*op, in, Mode::kTrain, DType::kF64);
  EXPECT_GT(testing::NormalizedMaxError(again[0], out[0]), 0.5);
  auto eval = testing::RunForward(*op, in, Mode::kEval, DType::kF64);
  EXPECT_EQ(testing::NormalizedMaxError(eval[0], in[0]), 0.0);
}

TEST(ReferenceOpShapes, MismatchesAreNamed) {
  ReferenceBackend ref;
  auto conv = ref.Conv2d({1, 0});
  auto bad = conv->OutputShapes({Shape{2, 3, 8, 8}, Shape{4, 2, 3, 3}, Shape{4}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("conv2d: channel counts disagree"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("(4, 2, 3, 3)"), std::string::npos);
  auto lin = ref.Linear()->OutputShapes({Shape{2, 5}, Shape{3, 4}, Shape{3}});
  EXPECT_FALSE(lin.ok());
}

}  // namespace
}  // namespace cohort
