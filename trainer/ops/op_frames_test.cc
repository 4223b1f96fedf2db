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
  Shapes<ConcatFrame> concat;
  EXPECT_EQ(concat.name(), "concat");
  EXPECT_EQ(Out(concat, {x, {8, 5, 32, 32}, {8, 1, 32, 32}}), (Shape{8, 9, 32, 32}));
}

// PyTorch's sizes (torch.nn.functional.max_pool2d, ceil_mode=True and False) for GoogLeNet's
// pools at 224 and for the cases where a last window would start in the padding and is dropped.
TEST(OpFramesTest, CeilModeMaxPoolSizesAreTorchs) {
  struct Case {
    int64_t in;
    int kernel, stride, padding;
    int64_t ceil, floor;
  };
  const Case cases[] = {{112, 3, 2, 0, 56, 55}, {56, 3, 2, 0, 28, 27}, {28, 3, 2, 0, 14, 13},
                        {14, 2, 2, 0, 7, 7},    {7, 2, 2, 0, 4, 3},    {8, 3, 2, 1, 5, 4},
                        {6, 3, 1, 1, 6, 6},     {9, 3, 3, 1, 4, 3},    {5, 2, 2, 1, 3, 3},
                        {10, 4, 3, 2, 4, 4}};
  for (const Case& c : cases) {
    for (bool ceil : {true, false}) {
      Shapes<Pool2dFrame> pool(PoolKind::kMax, Pool2dSpec{c.kernel, c.stride, c.padding, ceil});
      const int64_t want = ceil ? c.ceil : c.floor;
      EXPECT_EQ(Out(pool, {{1, 2, c.in, c.in}}), (Shape{1, 2, want, want}))
          << c.in << " k" << c.kernel << " s" << c.stride << " p" << c.padding << " ceil " << ceil;
    }
  }
}

TEST(OpFramesTest, InputsThatDoNotFitAreRefusedNamingTheOp) {
  const absl::Status relu = Shapes<ReluFrame>().OutputShapes({{2, 3}, {2, 3}}).status();
  EXPECT_EQ(relu.code(), absl::StatusCode::kInvalidArgument) << relu;
  EXPECT_TRUE(absl::StrContains(relu.message(), "relu")) << relu;
  const absl::Status linear =
      Shapes<LinearFrame>().OutputShapes({{8, 10}, {4, 9}, {4}}).status();
  EXPECT_EQ(linear.code(), absl::StatusCode::kInvalidArgument) << linear;
  EXPECT_TRUE(absl::StrContains(linear.message(), "linear")) << linear;
  const absl::Status concat =
      Shapes<ConcatFrame>().OutputShapes({{8, 3, 4, 4}, {8, 3, 4, 5}}).status();
  EXPECT_EQ(concat.code(), absl::StatusCode::kInvalidArgument) << concat;
  EXPECT_TRUE(absl::StrContains(concat.message(), "concat")) << concat;
  EXPECT_FALSE(Shapes<ConcatFrame>().OutputShapes({}).ok());
  Shapes<Pool2dFrame> avg_ceil(PoolKind::kAvg, Pool2dSpec{2, 2, 0, true});
  const absl::Status avg = avg_ceil.OutputShapes({{1, 1, 5, 5}}).status();
  EXPECT_TRUE(absl::StrContains(avg.message(), "ceil_mode is for max pooling only")) << avg;
}

}  // namespace
}  // namespace cohort
