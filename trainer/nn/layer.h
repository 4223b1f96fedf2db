#ifndef COHORT_TRAINER_NN_LAYER_H_
#define COHORT_TRAINER_NN_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/ops/op.h"

namespace cohort {

// A named trainable tensor and its gradient, both plain row-major in PyTorch layout
// (conv OIHW, linear [out, in]) so the kvstore and the export see them as they are.
struct Parameter {
  enum class Init { kZero, kOne, kHeUniform };

  std::string name;  // "<layer>.weight", "<layer>.bias"
  Tensor value;
  Tensor grad;
  Init init = Init::kZero;
  int64_t fan_in = 0;  // inputs feeding one output, for kHeUniform
};

// Fills a parameter from (seed, its name): He-uniform, U(±sqrt(6 / fan_in)), for weights
// feeding ReLUs; zeros or ones (batch-norm scales) otherwise. Independent of layer order and
// of the backend's dtype.
void InitParameter(uint64_t seed, Parameter* p);

// A named tensor that is not trained (batch norm's running statistics), owned by an op.
struct StateTensor {
  std::string name;  // "<layer>.running_mean"
  Tensor* value;
};

// One op with its parameters, reading the outputs of earlier layers. The op's inputs are
// {data inputs..., parameters...}; its first output is the layer's output. The model owns the
// data tensors (outputs and gradients, planned by their lifetimes); the layer remembers those
// of its last Forward for Backward. Not thread-safe.
class Layer {
 public:
  // Where a layer reads the model's input instead of an earlier layer's output.
  static constexpr int kModelInput = -1;

  // inputs: indices of the layers (or kModelInput) feeding the op's data inputs, in order.
  Layer(std::string name, std::unique_ptr<Op> op, std::vector<Parameter> params,
        std::vector<int> inputs);

  const std::string& name() const { return name_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const Op& op() const { return *op_; }
  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  std::vector<StateTensor>& state() { return state_; }

  // Before the first Forward: the op becomes one computing more (a fused ReLU) with the same
  // inputs and parameters, and the inputs are renumbered (layers before it were merged).
  void ReplaceOp(std::unique_ptr<Op> op);
  void RenumberInputs(const std::vector<int>& new_index);

  // xs: the shapes of the data inputs.
  absl::StatusOr<Shape> OutputShape(absl::Span<const Shape> xs) const;

  // y: the output, of the shape OutputShape gives. xs (the data inputs) and y stay alive until
  // Backward where op().ReadsInBackward() says Backward reads them.
  void Forward(Mode mode, absl::Span<const Tensor* const> xs, Tensor* y);
  // dy: gradient of the loss w.r.t. the last output. Writes every parameter's grad and the
  // gradient of each data input whose grad_xs entry is not null (for an op whose inputs share
  // one gradient, the first asked for only).
  void Backward(const Tensor& dy, absl::Span<Tensor* const> grad_xs);

 private:
  void ReadState();  // state_ from the op's

  std::string name_;
  std::unique_ptr<Op> op_;
  std::vector<Parameter> params_;
  std::vector<StateTensor> state_;
  std::vector<int> inputs_;
  std::vector<const Tensor*> xs_;  // data inputs of the last Forward
  const Tensor* y_ = nullptr;      // output of the last Forward
};

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_LAYER_H_
