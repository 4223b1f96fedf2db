#include "trainer/ops/cpu/onednn_backend.h"

#include <functional>

#include "gtest/gtest.h"
#include "trainer/ops/op_testing.h"
#include "trainer/ops/reference/reference_backend.h"

namespace cohort {
namespace {

using testing::OpCase;

// Each op with activations whose channels fill blocks of 16 (and so of 8), which the backend
// holds blocked, and between blocked and plain ones: first convolutions (3 channels in),
// concatenations of parts held differently, the shortcut from a plain activation.
std::vector<OpCase> BlockedOpCases() {
  return {
      {"b_conv_3x3", [](Backend& b) { return b.Conv2d({1, 1}); },
       {{2, 16, 6, 5}, {16, 16, 3, 3}, {16}}},
      {"b_conv_first_3x3", [](Backend& b) { return b.Conv2d({1, 1, false}); },
       {{32, 32, 8, 8}, {32, 32, 3, 3}}},
      {"b_conv_to_plain_stride2", [](Backend& b) { return b.Conv2d({2, 1}); },
       {{2, 16, 7, 7}, {8, 16, 3, 3}, {8}}},
      {"b_conv_1x1_stride2", [](Backend& b) { return b.Conv2d({2, 0, false}); },
       {{2, 32, 6, 6}, {16, 32, 1, 1}}},
      {"b_maxpool_3x3_stride2_pad1_ceil", [](Backend& b) { return b.MaxPool2d({3, 2, 1, true}); },
       {{1, 16, 6, 7}}},
      {"b_avgpool_2x2", [](Backend& b) { return b.AvgPool2d({2, 2, 0}); }, {{2, 16, 8, 8}}},
      {"b_global_avg_pool", [](Backend& b) { return b.GlobalAvgPool(); }, {{3, 32, 5, 6}}},
      {"b_batch_norm", [](Backend& b) { return b.BatchNorm({16}); }, {{4, 16, 5, 5}, {16}, {16}}},
      {"b_relu", [](Backend& b) { return b.Relu(); }, {{3, 16, 5, 5}}},
      {"b_add", [](Backend& b) { return b.Add(); }, {{2, 16, 4, 5}, {2, 16, 4, 5}}},
      {"b_concat", [](Backend& b) { return b.Concat(); }, {{2, 16, 3, 4}, {2, 32, 3, 4}}},
      {"b_concat_mixed", [](Backend& b) { return b.Concat(); },
       {{2, 16, 3, 4}, {2, 8, 3, 4}, {2, 24, 3, 4}}},
      {"b_concat_to_plain", [](Backend& b) { return b.Concat(); }, {{2, 16, 3, 3}, {2, 8, 3, 3}}},
      {"b_dropout", [](Backend& b) { return b.Dropout({0.3f, 7}); }, {{3, 16, 5, 5}}},
      {"b_subsample_pad", [](Backend& b) { return b.SubsamplePad({2, 8}); }, {{2, 16, 7, 6}}},
      {"b_subsample_pad_from_plain", [](Backend& b) { return b.SubsamplePad({2, 4}); },
       {{2, 8, 6, 6}}},
      {"b_flatten", [](Backend& b) { return b.Flatten(); }, {{2, 16, 4, 4}}},
  };
}

// relu(op(...)) as two ops, for a backend that fuses no ReLU into op (the reference).
class ReluAfter final : public Op {
 public:
  ReluAfter(std::unique_ptr<Op> op, std::unique_ptr<Op> relu)
      : op_(std::move(op)), relu_(std::move(relu)) {}
  absl::string_view name() const override { return op_->name(); }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    return op_->OutputShapes(in);
  }
  void Forward(Mode mode, absl::Span<const Tensor* const> in,
               absl::Span<Tensor* const> out) override {
    mid_ = Tensor(out[0]->shape(), out[0]->dtype());
    op_->Forward(mode, in, {&mid_});
    const Tensor* mid = &mid_;
    relu_->Forward(mode, {&mid, 1}, out);
  }
  void Backward(absl::Span<const Tensor* const> in, absl::Span<const Tensor* const> out,
                absl::Span<const Tensor* const> grad_out,
                absl::Span<Tensor* const> grad_in) override {
    Tensor dmid(mid_.shape(), mid_.dtype());
    const Tensor* mid = &mid_;
    Tensor* dmid_ptr = &dmid;
    relu_->Backward({&mid, 1}, out, grad_out, {&dmid_ptr, 1});
    const Tensor* dmid_in = &dmid;
    const Tensor* mid_out = &mid_;
    op_->Backward(in, {&mid_out, 1}, {&dmid_in, 1}, grad_in);
  }

 private:
  std::unique_ptr<Op> op_, relu_;
  Tensor mid_;
};

// The op with the ReLU after it fused where the backend can, else the two in turn.
std::function<std::unique_ptr<Op>(Backend&)> WithRelu(
    std::function<std::unique_ptr<Op>(Backend&)> make) {
  return [make](Backend& b) -> std::unique_ptr<Op> {
    std::unique_ptr<Op> op = make(b);
    if (std::unique_ptr<Op> fused = b.FuseRelu(*op)) return fused;
    return std::make_unique<ReluAfter>(std::move(op), b.Relu());
  };
}

std::vector<OpCase> FusedReluCases() {
  auto bn = [](int64_t c) { return [c](Backend& b) { return b.BatchNorm({c}); }; };
  auto add = [](Backend& b) { return b.Add(); };
  return {
      {"bn_relu", WithRelu(bn(3)), {{4, 3, 5, 5}, {3}, {3}}},
      {"b_bn_relu", WithRelu(bn(16)), {{4, 16, 5, 5}, {16}, {16}}},
      {"add_relu", WithRelu(add), {{2, 3, 4, 5}, {2, 3, 4, 5}}},
      {"b_add_relu", WithRelu(add), {{2, 16, 4, 5}, {2, 16, 4, 5}}},
  };
}

std::vector<OpCase> AllOpCases() {
  std::vector<OpCase> cases = testing::StandardOpCases();
  for (OpCase& c : BlockedOpCases()) cases.push_back(std::move(c));
  for (OpCase& c : FusedReluCases()) cases.push_back(std::move(c));
  return cases;
}

// Rank-4 tensors are activations, except a convolution's weights.
bool IsActivation(const Op& op, size_t input, const Shape& shape) {
  return shape.rank() == 4 && !(op.name() == "conv2d" && input == 1);
}

class OnednnOpTest : public ::testing::TestWithParam<std::tuple<OpCase, ActivationLayout>> {
 public:
  static std::string Name(const ::testing::TestParamInfo<ParamType>& info) {
    return std::get<0>(info.param).label +
           (std::get<1>(info.param) == ActivationLayout::kBlocked ? "_blocked" : "_plain");
  }
};

// Plain tensors in the form the backend holds them in (activations only) and back.
std::vector<Tensor> Held(const OnednnBackend& dnn, const Op& op, const std::vector<Tensor>& plain) {
  std::vector<Tensor> held;
  for (size_t i = 0; i < plain.size(); ++i) {
    held.emplace_back(plain[i].shape(), plain[i].dtype());
    if (IsActivation(op, i, plain[i].shape())) {
      dnn.ActivationFromPlain(plain[i], &held.back());
    } else {
      held.back().CopyFrom(plain[i]);
    }
  }
  return held;
}
Tensor Plain(const OnednnBackend& dnn, const Tensor& held, bool activation) {
  Tensor plain(held.shape(), held.dtype());
  if (activation) {
    dnn.ActivationToPlain(held, &plain);
  } else {
    plain.CopyFrom(held);
  }
  return plain;
}

// Forward and backward on fresh random inputs from each seed, against the double-precision
// reference.
void ExpectMatchesReference(const OpCase& c, ActivationLayout layout,
                            std::initializer_list<uint64_t> seeds,
                            std::initializer_list<Mode> modes) {
  OnednnBackend dnn(0, layout);
  ReferenceBackend ref;
  for (uint64_t seed : seeds) {
    for (Mode mode : modes) {
      std::vector<Tensor> in_plain = testing::RandomInputs(c, DType::kF32, seed);
      std::vector<Tensor> in_ref = testing::ToReferenceInputs(in_plain);
      auto op = c.make(dnn);
      auto op_ref = c.make(ref);
      const std::vector<Tensor> in = Held(dnn, *op, in_plain);
      auto out = testing::RunForward(*op, in, mode, DType::kF32);
      auto out_ref = testing::RunForward(*op_ref, in_ref, mode, DType::kF64);
      ASSERT_EQ(out.size(), out_ref.size());
      for (size_t k = 0; k < out.size(); ++k) {
        EXPECT_LT(testing::NormalizedMaxError(Plain(dnn, out[k], out[k].shape().rank() == 4),
                                              out_ref[k]),
                  1e-5)
            << c.label << " forward output " << k << " seed " << seed;
      }
      if (mode == Mode::kEval) continue;
      // Backward with a random upstream gradient.
      std::vector<Tensor> dy, dy_ref;
      for (size_t k = 0; k < out.size(); ++k) {
        testing::OpCase up{"", nullptr, {out[k].shape()}};
        Tensor r = std::move(testing::RandomInputs(up, DType::kF32, seed + 100)[0]);
        dy_ref.push_back(ConvertTo(r, DType::kF64));
        dy.emplace_back(r.shape());
        if (r.shape().rank() == 4) {
          dnn.ActivationFromPlain(r, &dy.back());
        } else {
          dy.back().CopyFrom(r);
        }
      }
      auto grads = testing::RunBackward(*op, in, out, dy, DType::kF32);
      auto grads_ref = testing::RunBackward(*op_ref, in_ref, out_ref, dy_ref, DType::kF64);
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].dtype() == DType::kI32) continue;
        EXPECT_LT(testing::NormalizedMaxError(
                      Plain(dnn, grads[i], IsActivation(*op, i, in[i].shape())), grads_ref[i]),
                  1e-5)
            << c.label << " gradient of input " << i << " seed " << seed;
      }
    }
  }
}

TEST_P(OnednnOpTest, MatchesReference) {
  const auto& [c, layout] = GetParam();
  ExpectMatchesReference(c, layout, {11, 12, 13}, {Mode::kEval, Mode::kTrain});
}

// Convolutions run as oneDNN picks for each problem (convolution_auto): a wide one with a large
// batch, as ResNet-20's at batch 128, runs as Winograd F(4x4, 3x3) here on AVX-512 (forward
// and data gradient; ONEDNN_VERBOSE names it jit_wino_4x3), which rounds differently.
TEST(OnednnOpTest, WideConvolutionsMatchTheReference) {
  const OpCase c{"conv_3x3_wide", [](Backend& b) { return b.Conv2d({1, 1, false}); },
                 {{128, 64, 8, 8}, {64, 64, 3, 3}}};
  ExpectMatchesReference(c, ActivationLayout::kBlocked, {11}, {Mode::kTrain});
}

// Central differences straight on the fp32 primitives (sampled coordinates; fp32 limits the
// step and the tolerance). The op is a function of its held inputs' elements, whatever their
// order, so the held forms are differentiated as they are.
TEST_P(OnednnOpTest, BackwardMatchesFiniteDifferences) {
  const auto& [c, layout] = GetParam();
  OnednnBackend dnn(0, layout);
  EXPECT_LT(testing::FiniteDifferenceError(dnn, c, 21, 1e-3, 32), 1e-2) << c.label;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OnednnOpTest,
                         ::testing::Combine(::testing::ValuesIn(AllOpCases()),
                                            ::testing::Values(ActivationLayout::kBlocked,
                                                              ActivationLayout::kPlain)),
                         OnednnOpTest::Name);

// The fused cases above run fused ops on this backend, against the two ops on the reference.
TEST(OnednnFusionTest, BatchNormAndSumsTakeTheReluAfterThem) {
  OnednnBackend dnn;
  ReferenceBackend ref;
  for (const OpCase& c : FusedReluCases()) {
    const std::unique_ptr<Op> fused = c.make(dnn);
    EXPECT_EQ(dynamic_cast<ReluAfter*>(fused.get()), nullptr) << c.label;
    EXPECT_NE(dynamic_cast<ReluAfter*>(c.make(ref).get()), nullptr) << c.label;
  }
  EXPECT_EQ(dnn.FuseRelu(*dnn.Relu()), nullptr);
  EXPECT_EQ(dnn.FuseRelu(*dnn.Conv2d({1, 1})), nullptr);
}

// The blocked cases above hold blocked activations on this CPU: the layout is exercised.
TEST(OnednnLayoutTest, ActivationsWhoseChannelsFillBlocksAreHeldBlocked) {
  OnednnBackend dnn;
  ASSERT_GT(dnn.channel_block(), 0) << "this CPU's convolutions pick a plain layout";
  EXPECT_EQ(16 % dnn.channel_block(), 0);
  EXPECT_TRUE(dnn.HoldsBlocked(Shape{2, 16, 3, 3}));
  EXPECT_FALSE(dnn.HoldsBlocked(Shape{2, 3, 3, 3}));
  EXPECT_FALSE(dnn.HoldsBlocked(Shape{2, 16}));
  EXPECT_FALSE(OnednnBackend(0, ActivationLayout::kPlain).HoldsBlocked(Shape{2, 16, 3, 3}));
  // Held blocked, an activation's bytes differ from its plain ones; back, they are its own.
  Tensor plain(Shape{2, 16, 3, 3}), held, back;
  for (int64_t i = 0; i < plain.numel(); ++i) plain.data<float>()[i] = static_cast<float>(i);
  dnn.ActivationFromPlain(plain, &held);
  EXPECT_EQ(held.data<float>()[1], 9.0f);  // (0, 1, 0, 0) follows (0, 0, 0, 0)
  dnn.ActivationToPlain(held, &back);
  EXPECT_EQ(testing::NormalizedMaxError(back, plain), 0.0);
  // Images of 16 channels come in blocked; RGB ones as they are.
  Tensor scratch;
  EXPECT_EQ(dnn.ImportImages(plain, &scratch).data<float>()[1], 9.0f);
  Tensor rgb(Shape{2, 3, 3, 3});
  EXPECT_EQ(&dnn.ImportImages(rgb, &scratch), &rgb);
}

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

// The bags a batch's categorical features make: rows pooled forward, gradients scattered back.
TEST(OnednnOpTest, EmbeddingBagMatchesReference) {
  OnednnBackend dnn;
  ReferenceBackend ref;
  // 3 bags over 6 rows of 8: {0, 5, 5}, {2}, {} and a last one {1, 3, 0, 4}.
  const std::vector<int32_t> indices = {0, 5, 5, 2, 1, 3, 0, 4}, offsets = {0, 3, 4, 4};
  const auto i32 = [](const std::vector<int32_t>& values) {
    Tensor t(Shape{static_cast<int64_t>(values.size())}, DType::kI32);
    std::copy(values.begin(), values.end(), t.span<int32_t>().begin());
    return t;
  };
  for (auto pooling : {EmbeddingBagSpec::Pooling::kSum, EmbeddingBagSpec::Pooling::kMean}) {
    const OpCase rows_only{"embedding_bag", nullptr, {{6, 8}}};
    std::vector<Tensor> in = testing::RandomInputs(rows_only, DType::kF32, 21);
    in.push_back(i32(indices));
    in.push_back(i32(offsets));
    std::vector<Tensor> ref_in = testing::ToReferenceInputs(in);
    auto op = dnn.EmbeddingBag({pooling});
    auto ref_op = ref.EmbeddingBag({pooling});
    auto out = testing::RunForward(*op, in, Mode::kTrain, DType::kF32);
    auto ref_out = testing::RunForward(*ref_op, ref_in, Mode::kTrain, DType::kF64);
    EXPECT_LT(testing::NormalizedMaxError(out[0], ref_out[0]), 1e-6);
    std::vector<Tensor> grad =
        testing::RandomInputs({"dy", nullptr, {out[0].shape()}}, DType::kF32, 22);
    std::vector<Tensor> ref_grad = testing::ToReferenceInputs(grad);
    Tensor drows(Shape{6, 8}, DType::kF32), ref_drows(Shape{6, 8}, DType::kF64);
    const std::vector<const Tensor*> args = {&in[0], &in[1], &in[2]};
    const std::vector<const Tensor*> ref_args = {&ref_in[0], &ref_in[1], &ref_in[2]};
    op->Backward(args, {&out[0]}, {&grad[0]}, {&drows, nullptr, nullptr});
    ref_op->Backward(ref_args, {&ref_out[0]}, {&ref_grad[0]}, {&ref_drows, nullptr, nullptr});
    EXPECT_LT(testing::NormalizedMaxError(drows, ref_drows), 1e-6);
  }
}

// A click model's interaction and loss: forward, backward, and against finite differences.
TEST(OnednnOpTest, ClickModelOpsMatchReferenceAndFiniteDifferences) {
  const OpCase dot{"dot_interaction", [](Backend& b) { return b.DotInteraction(); }, {{4, 5, 3}}};
  const OpCase bce{"binary_cross_entropy", [](Backend& b) { return b.BinaryCrossEntropy(); },
                   {{9}, {9}}, /*num_classes=*/2};
  for (const OpCase& c : {dot, bce}) {
    ExpectMatchesReference(c, ActivationLayout::kPlain, {11, 12}, {Mode::kTrain});
    ReferenceBackend ref;
    EXPECT_LT(testing::FiniteDifferenceError(ref, c, 21, 1e-6, 0), 1e-6) << c.label;
  }
}

// Running statistics follow two training batches the same way on both backends, and
// evaluation then normalises with them.
TEST(OnednnOpTest, BatchNormRunningStatisticsMatchReference) {
  OnednnBackend dnn;
  ReferenceBackend ref;
  const OpCase c{"bn",
                 [](Backend& b) {
                   return b.BatchNorm({3, 1e-5f, 0.25f});
                 },
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
