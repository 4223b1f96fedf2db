// Every backend's ops take their names and output shapes from these frames: the shapes follow
// the specs, and inputs that do not fit are refused naming the op.

#include "trainer/ops/op_frames.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// A frame with no arithmetic, to ask it for names and shapes.
template <typename Frame>
class Shapes final : public Frame {
 public:
  using Frame::Frame;
  void Forward(Mode, absl::Span<const Tensor* const>, absl::Span<Tensor* const>) override {}
  void Backward(absl::Span<const Tensor* const>, absl::Span<const Tensor* const>,
                absl::Span<const Tensor* const>, absl::Span<Tensor* const>) override {}
};

Shape Out(const Op& op, std::vector<Shape> in) {
  absl::StatusOr<std::vector<Shape>> out = op.OutputShapes(in);
  EXPECT_TRUE(out.ok()) << op.name() << ": " << out.status();
  return out.ok() && out->size() == 1 ? (*out)[0] : Shape{};
}

TEST(OpFramesTest, NamesAndShapesFollowTheSpecs) {
  const Shape x{8, 3, 32, 32};
  Shapes<Conv2dFrame> conv(Conv2dSpec{2, 1, true});
  EXPECT_EQ(conv.name(), "conv2d");
  EXPECT_EQ(Out(conv, {x, {16, 3, 3, 3}, {16}}), (Shape{8, 16, 16, 16}));
  Shapes<Pool2dFrame> max(PoolKind::kMax, Pool2dSpec{2, 2, 0});
  EXPECT_EQ(max.name(), "max_pool2d");
  EXPECT_EQ(Out(max, {x}), (Shape{8, 3, 16, 16}));
  Shapes<Pool2dFrame> global(PoolKind::kGlobalAvg, Pool2dSpec{});
  EXPECT_EQ(global.name(), "global_avg_pool");
  EXPECT_EQ(Out(global, {x}), (Shape{8, 3}));
  EXPECT_EQ(Shapes<Pool2dFrame>(PoolKind::kAvg, Pool2dSpec{}).name(), "avg_pool2d");
  Shapes<AddFrame> add;
  EXPECT_EQ(add.name(), "add");
  EXPECT_TRUE(add.InputGradientsAreOutputGradient());
  EXPECT_EQ(Out(add, {x, x}), x);
  EXPECT_EQ(Out(Shapes<ReluFrame>(), {x}), x);
  EXPECT_EQ(Out(Shapes<DropoutFrame>(DropoutSpec{}), {x}), x);
  EXPECT_EQ(Out(Shapes<LinearFrame>(), {{8, 10}, {4, 10}, {4}}), (Shape{8, 4}));
  EXPECT_EQ(Shapes<SoftmaxCrossEntropyFrame>().name(), "softmax_cross_entropy");
  EXPECT_EQ(Shapes<BatchNormFrame>(BatchNormSpec{3}).name(), "batch_norm");
  EXPECT_EQ(Shapes<SubsamplePadFrame>(SubsamplePadSpec{}).name(), "subsample_pad");
}

TEST(OpFramesTest, InputsThatDoNotFitAreRefusedNamingTheOp) {
  const absl::Status relu = Shapes<ReluFrame>().OutputShapes({{2, 3}, {2, 3}}).status();
  EXPECT_EQ(relu.code(), absl::StatusCode::kInvalidArgument) << relu;
  EXPECT_TRUE(absl::StrContains(relu.message(), "relu")) << relu;
  const absl::Status linear =
      Shapes<LinearFrame>().OutputShapes({{8, 10}, {4, 9}, {4}}).status();
  EXPECT_EQ(linear.code(), absl::StatusCode::kInvalidArgument) << linear;
  EXPECT_TRUE(absl::StrContains(linear.message(), "linear")) << linear;
}

}  // namespace
}  // namespace cohort
