#ifndef COHORT_TRAINER_OPS_OP_TESTING_H_
#define COHORT_TRAINER_OPS_OP_TESTING_H_

// Helpers that hold a backend's ops to the reference: the same op case is run on fresh random
// inputs through both, and gradients are checked by finite differences.

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/ops/op.h"

namespace cohort::testing {

struct OpCase {
  std::string label;
  std::function<std::unique_ptr<Op>(Backend&)> make;
  std::vector<Shape> inputs;
  // When > 0, the last input holds I32 labels in [0, num_classes) and has no gradient.
  int num_classes = 0;
};

// The op cases covering what LeNet, the MLP, the ResNets and GoogLeNet need, with strides,
// padding and odd sizes.
std::vector<OpCase> StandardOpCases();

// A host tensor of these values (row-major), its dtype T's.
template <typename T>
Tensor TensorOf(Shape shape, const std::vector<T>& values) {
  Tensor t(std::move(shape), DTypeOf<T>());
  std::copy(values.begin(), values.end(), t.span<T>().begin());
  return t;
}

// Uniform [-1, 1) values (labels for a labels input), from the seed, in the given dtype.
std::vector<Tensor> RandomInputs(const OpCase& c, DType dtype, uint64_t seed);

// The same inputs for the reference backend: F64, labels left I32.
std::vector<Tensor> ToReferenceInputs(const std::vector<Tensor>& in);

std::vector<Tensor> RunForward(Op& op, const std::vector<Tensor>& in, Mode mode, DType dtype);

// Gradients of every non-label input given grad_out (empty tensor for a labels input).
std::vector<Tensor> RunBackward(Op& op, const std::vector<Tensor>& in,
                                const std::vector<Tensor>& out,
                                const std::vector<Tensor>& grad_out, DType dtype);

// max|got - want| / max|want| over all elements (both converted to double).
double NormalizedMaxError(const Tensor& got, const Tensor& want);

// Largest disagreement between Backward and central differences of L = sum(out · r) over the
// sampled coordinates of every non-label input (all when max_coords <= 0), normalised by the
// largest analytic gradient of that input. Coordinates with a kink within ±eps are skipped;
// at least half must be smooth.
double FiniteDifferenceError(Backend& backend, const OpCase& c, uint64_t seed, double eps,
                             int max_coords);

}  // namespace cohort::testing

#endif  // COHORT_TRAINER_OPS_OP_TESTING_H_
