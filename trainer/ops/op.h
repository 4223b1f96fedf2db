#ifndef COHORT_TRAINER_OPS_OP_H_
#define COHORT_TRAINER_OPS_OP_H_

#include <memory>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

enum class Mode { kTrain, kEval };

// One differentiable operation. Inputs and outputs come in the op's documented order; the
// caller allocates outputs with OutputShapes() and keeps them between Forward and Backward.
// An op may keep state from Forward for Backward (a pooling workspace, softmax values) and
// caches its primitives per input shape, so one op instance serves one layer. Not thread-safe.
class Op {
 public:
  virtual ~Op() = default;
  virtual absl::string_view name() const = 0;

  // Output shapes for these input shapes; InvalidArgument naming the op and the shapes when
  // they do not fit together.
  virtual absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const = 0;

  virtual void Forward(Mode mode, absl::Span<const Tensor* const> in,
                       absl::Span<Tensor* const> out) = 0;

  // Writes the gradient of every input whose grad_in entry is non-null (overwriting it), given
  // the gradients of the outputs. Must follow a kTrain Forward on the same inputs.
  virtual void Backward(absl::Span<const Tensor* const> in, absl::Span<const Tensor* const> out,
                        absl::Span<const Tensor* const> grad_out,
                        absl::Span<Tensor* const> grad_in) = 0;
};

struct Conv2dSpec {
  int stride = 1;
  int padding = 0;  // zero padding on every side
};

struct Pool2dSpec {
  int kernel = 2;
  int stride = 2;
  int padding = 0;
};

// Makes the ops of one backend. Tensors its ops take are of dtype() and live on its
// allocator's device. Every backend implements every op with the same semantics as the
// reference backend, which the tests hold the others to.
//
// Op signatures (shapes):
//   Conv2d:     in {x (N,C,H,W), w (O,C,KH,KW), b (O)}   out {y (N,O,OH,OW)}
//   MaxPool2d:  in {x (N,C,H,W)}                         out {y (N,C,OH,OW)}
//   Relu:       in {x (any)}                             out {y (same)}
//   Linear:     in {x (N,I), w (O,I), b (O)}             out {y (N,O)}
//   Flatten:    in {x (N,...)}                           out {y (N, prod(...))}
//   SoftmaxCrossEntropy: in {logits (N,K), labels (N) I32}  out {loss () = mean over N}
class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::string_view name() const = 0;
  virtual DType dtype() const = 0;
  virtual Allocator* allocator() const { return CpuAllocator(); }

  virtual std::unique_ptr<Op> Conv2d(const Conv2dSpec& spec) = 0;
  virtual std::unique_ptr<Op> MaxPool2d(const Pool2dSpec& spec) = 0;
  virtual std::unique_ptr<Op> Relu() = 0;
  virtual std::unique_ptr<Op> Linear() = 0;
  virtual std::unique_ptr<Op> Flatten();
  virtual std::unique_ptr<Op> SoftmaxCrossEntropy() = 0;
};

// Shape rules shared by every backend (the errors name the op and the shapes).
absl::StatusOr<Shape> Conv2dOutputShape(const Conv2dSpec& spec, const Shape& x, const Shape& w,
                                        const Shape& b);
absl::StatusOr<Shape> Pool2dOutputShape(absl::string_view op, const Pool2dSpec& spec,
                                        const Shape& x);
absl::StatusOr<Shape> LinearOutputShape(const Shape& x, const Shape& w, const Shape& b);
absl::StatusOr<Shape> SoftmaxCrossEntropyOutputShape(const Shape& logits, const Shape& labels);
// Checks that a shape list has the expected length before an op indexes into it.
absl::Status ExpectInputCount(absl::string_view op, absl::Span<const Shape> in, size_t count);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_OP_H_
