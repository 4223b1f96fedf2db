#ifndef COHORT_TRAINER_OPS_OP_FRAMES_H_
#define COHORT_TRAINER_OPS_OP_FRAMES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/ops/op.h"

namespace cohort {

// What every backend's op of one kind shares: its name, its spec, and how its inputs' shapes
// give its outputs' (one check for every backend). A backend's op derives from its kind's
// frame and adds the arithmetic (Forward, Backward, State).

class Conv2dFrame : public Op {
 public:
  explicit Conv2dFrame(const Conv2dSpec& spec) : spec_(spec) {}
  absl::string_view name() const final { return "conv2d"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;

 protected:
  const Conv2dSpec spec_;
};

enum class PoolKind { kMax, kAvg, kGlobalAvg };

// Max and average pooling over windows, and the average over each channel's whole map. Only
// max pooling takes ceil_mode (GoogLeNet's; PyTorch's average would divide its last windows by
// what they cover, which no model here needs).
class Pool2dFrame : public Op {
 public:
  Pool2dFrame(PoolKind kind, const Pool2dSpec& spec) : kind_(kind), spec_(spec) {}
  absl::string_view name() const final;
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;

 protected:
  const PoolKind kind_;
  const Pool2dSpec spec_;
};

class BatchNormFrame : public Op {
 public:
  explicit BatchNormFrame(const BatchNormSpec& spec) : spec_(spec) {}
  absl::string_view name() const final { return "batch_norm"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;
  const BatchNormSpec& spec() const { return spec_; }

 protected:
  const BatchNormSpec spec_;
};

// The sum of its inputs: each input's gradient is the output's.
class AddFrame : public Op {
 public:
  absl::string_view name() const final { return "add"; }
  bool InputGradientsAreOutputGradient() const final { return true; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;
};

// Channels of several inputs one after another; each input's gradient is its slice of the
// output's.
class ConcatFrame : public Op {
 public:
  absl::string_view name() const final { return "concat"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;
};

class DropoutFrame : public Op {
 public:
  explicit DropoutFrame(const DropoutSpec& spec) : spec_(spec) {}
  absl::string_view name() const final { return "dropout"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;

 protected:
  const DropoutSpec spec_;
};

class SubsamplePadFrame : public Op {
 public:
  explicit SubsamplePadFrame(const SubsamplePadSpec& spec) : spec_(spec) {}
  absl::string_view name() const final { return "subsample_pad"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;

 protected:
  const SubsamplePadSpec spec_;
};

class ReluFrame : public Op {
 public:
  absl::string_view name() const final { return "relu"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;
};

class LinearFrame : public Op {
 public:
  absl::string_view name() const final { return "linear"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;
};

class SoftmaxCrossEntropyFrame : public Op {
 public:
  absl::string_view name() const final { return "softmax_cross_entropy"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const final;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_OP_FRAMES_H_
