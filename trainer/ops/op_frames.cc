#include "trainer/ops/op_frames.h"

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

// The shape of the one output, or the error saying why there is none.
absl::StatusOr<std::vector<Shape>> One(absl::StatusOr<Shape> y) {
  if (!y.ok()) return y.status();
  return std::vector<Shape>{*std::move(y)};
}

// The one input's shape, for ops that keep it.
absl::StatusOr<std::vector<Shape>> SameAsInput(absl::string_view op,
                                               absl::Span<const Shape> in) {
  RETURN_IF_ERROR(ExpectInputCount(op, in, 1));
  return std::vector<Shape>{in[0]};
}

}  // namespace

absl::StatusOr<std::vector<Shape>> Conv2dFrame::OutputShapes(absl::Span<const Shape> in) const {
  return One(Conv2dOutputShape(spec_, in));
}

absl::string_view Pool2dFrame::name() const {
  switch (kind_) {
    case PoolKind::kMax:
      return "max_pool2d";
    case PoolKind::kAvg:
      return "avg_pool2d";
    case PoolKind::kGlobalAvg:
      return "global_avg_pool";
  }
  return "pool";
}

absl::StatusOr<std::vector<Shape>> Pool2dFrame::OutputShapes(absl::Span<const Shape> in) const {
  RETURN_IF_ERROR(ExpectInputCount(name(), in, 1));
  if (spec_.ceil_mode && kind_ != PoolKind::kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": ceil_mode is for max pooling only (input ", in[0].ToString(), ")"));
  }
  return One(kind_ == PoolKind::kGlobalAvg ? GlobalAvgPoolOutputShape(in[0])
                                           : Pool2dOutputShape(name(), spec_, in[0]));
}

absl::StatusOr<std::vector<Shape>> BatchNormFrame::OutputShapes(
    absl::Span<const Shape> in) const {
  return One(BatchNormOutputShape(spec_, in));
}

absl::StatusOr<std::vector<Shape>> AddFrame::OutputShapes(absl::Span<const Shape> in) const {
  return One(AddOutputShape(in));
}

absl::StatusOr<std::vector<Shape>> ConcatFrame::OutputShapes(absl::Span<const Shape> in) const {
  return One(ConcatOutputShape(in));
}

absl::StatusOr<std::vector<Shape>> DropoutFrame::OutputShapes(absl::Span<const Shape> in) const {
  return SameAsInput(name(), in);
}

absl::StatusOr<std::vector<Shape>> SubsamplePadFrame::OutputShapes(
    absl::Span<const Shape> in) const {
  RETURN_IF_ERROR(ExpectInputCount(name(), in, 1));
  return One(SubsamplePadOutputShape(spec_, in[0]));
}

absl::StatusOr<std::vector<Shape>> ReluFrame::OutputShapes(absl::Span<const Shape> in) const {
  return SameAsInput(name(), in);
}

absl::StatusOr<std::vector<Shape>> LinearFrame::OutputShapes(absl::Span<const Shape> in) const {
  RETURN_IF_ERROR(ExpectInputCount(name(), in, 3));
  return One(LinearOutputShape(in[0], in[1], in[2]));
}

absl::StatusOr<std::vector<Shape>> SoftmaxCrossEntropyFrame::OutputShapes(
    absl::Span<const Shape> in) const {
  RETURN_IF_ERROR(ExpectInputCount(name(), in, 2));
  return One(SoftmaxCrossEntropyOutputShape(in[0], in[1]));
}

}  // namespace cohort
