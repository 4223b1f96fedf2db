#include "trainer/ops/cpu/onednn_backend.h"

#include "gtest/gtest.h"
#include "trainer/ops/op_testing.h"
#include "trainer/ops/reference/reference_backend.h"

namespace cohort {
namespace {

using testing::OpCase;

class OnednnOpTest : public ::testing::TestWithParam<OpCase> {};

// Forward and backward on fresh random inputs, against the double-precision reference.
TEST_P(OnednnOpTest, MatchesReference) {
  const OpCase& c = GetParam();
  OnednnBackend dnn;
  ReferenceBackend ref;
  for (uint64_t seed : {11, 12, 13}) {
    for (Mode mode : {Mode::kEval, Mode::kTrain}) {
      std::vector<Tensor> in = testing::RandomInputs(c, DType::kF32, seed);
      std::vector<Tensor> in_ref = testing::ToReferenceInputs(in);
      auto op = c.make(dnn);
      auto op_ref = c.make(ref);
      auto out = testing::RunForward(*op, in, mode, DType::kF32);
      auto out_ref = testing::RunForward(*op_ref, in_ref, mode, DType::kF64);
      ASSERT_EQ(out.size(), out_ref.size());
      for (size_t k = 0; k < out.size(); ++k) {
        EXPECT_LT(testing::NormalizedMaxError(out[k], out_ref[k]), 1e-5)
            << c.label << " forward output " << k << " seed " << seed;
      }
      if (mode == Mode::kEval) continue;
      // Backward with a random upstream gradient.
      std::vector<Tensor> dy, dy_ref;
      for (size_t k = 0; k < out.size(); ++k) {
        testing::OpCase up{"", nullptr, {out[k].shape()}};
        dy.push_back(std::move(testing::RandomInputs(up, DType::kF32, seed + 100)[0]));
        dy_ref.push_back(ConvertTo(dy.back(), DType::kF64));
      }
      auto grads = testing::RunBackward(*op, in, out, dy, DType::kF32);
      auto grads_ref = testing::RunBackward(*op_ref, in_ref, out_ref, dy_ref, DType::kF64);
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].dtype() == DType::kI32) continue;
        EXPECT_LT(testing::NormalizedMaxError(grads[i], grads_ref[i]), 1e-5)
            << c.label << " gradient of input " << i << " seed " << seed;
      }
    }
  }
}

// Central differences straight on the fp32 primitives (sampled coordinates; fp32 limits the
// step and the tolerance).
TEST_P(OnednnOpTest, BackwardMatchesFiniteDifferences) {
  OnednnBackend dnn;
  EXPECT_LT(testing::FiniteDifferenceError(dnn, GetParam(), 21, 1e-3, 32), 1e-2)
      << GetParam().label;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OnednnOpTest, ::testing::ValuesIn(testing::StandardOpCases()),
                         [](const auto& info) { return info.param.label; });

TEST(OnednnOpTest, ReusesBuffersAcrossSteps) {
  // Same shapes on every call: outputs land in the caller's buffers, nothing moves.
  OnednnBackend dnn;
  const OpCase c = testing::StandardOpCases()[0];
  auto op = c.make(dnn);
  auto in = testing::RandomInputs(c, DType::kF32, 3);
  auto first = testing::RunForward(*op, in, Mode::kTrain, DType::kF32);
  auto second = testing::RunForward(*op, in, Mode::kTrain, DType::kF32);
  EXPECT_EQ(testing::NormalizedMaxError(first[0], second[0]), 0.0);
}

// Running statistics follow two training batches the same way on both backends, and
// evaluation then normalises with them.
TEST(OnednnOpTest, BatchNormRunningStatisticsMatchReference) {
  OnednnBackend dnn;
  ReferenceBackend ref;
  const OpCase c{"bn", [](Backend& b) { return b.BatchNorm({3, 1e-5f, 0.25f}); },
                 {{4, 3, 5, 5}, {3}, {3}}};
  auto op = c.make(dnn);
  auto op_ref = c.make(ref);
  for (uint64_t seed : {5, 6}) {
    auto in = testing::RandomInputs(c, DType::kF32, seed);
    const std::vector<Tensor> in_ref = testing::ToReferenceInputs(in);
    testing::RunForward(*op, in, Mode::kTrain, DType::kF32);
    testing::RunForward(*op_ref, in_ref, Mode::kTrain, DType::kF64);
  }
  auto state = op->State();
  auto state_ref = op_ref->State();
  ASSERT_EQ(state.size(), 2u);
  for (size_t k = 0; k < state.size(); ++k) {
    EXPECT_EQ(state[k].name, state_ref[k].name);
    EXPECT_LT(testing::NormalizedMaxError(*state[k].value, *state_ref[k].value), 1e-6)
        << state[k].name;
  }
  // Two updates with momentum 0.25 from (0, 1) have moved the running variance off 1.
  EXPECT_GT(std::abs(state_ref[1].value->data<double>()[0] - 1.0), 1e-3);
  auto in = testing::RandomInputs(c, DType::kF32, 7);
  const std::vector<Tensor> in_ref = testing::ToReferenceInputs(in);
  auto out = testing::RunForward(*op, in, Mode::kEval, DType::kF32);
  auto out_ref = testing::RunForward(*op_ref, in_ref, Mode::kEval, DType::kF64);
  EXPECT_LT(testing::NormalizedMaxError(out[0], out_ref[0]), 1e-5);
}

TEST(OnednnOpTest, PrimitiveTimeIsCounted) {
  OnednnBackend dnn;
  const OpCase c = testing::StandardOpCases()[0];
  auto op = c.make(dnn);
  const double before = dnn.primitive_seconds();
  testing::RunForward(*op, testing::RandomInputs(c, DType::kF32, 3), Mode::kTrain, DType::kF32);
  EXPECT_GT(dnn.primitive_seconds(), before);
}

}  // namespace
}  // namespace cohort
