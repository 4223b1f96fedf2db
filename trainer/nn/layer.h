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
// {data inputs..., parameters...}; its first output is the layer's output. The layer owns
// its output and input-gradient buffers and reuses them across steps. Not thread-safe.
class Layer {
 public:
  // Where a layer reads the model's input instead of an earlier layer's output.
  static constexpr int kModelInput = -1;

  // inputs: indices of the layers (or kModelInput) feeding the op's data inputs, in order.
  // dtype: what the op computes in (its backend's dtype); allocator: where its buffers live
  // (its backend's device).
  Layer(std::string name, std::unique_ptr<Op> op, std::vector<Parameter> params, DType dtype,
        Allocator* allocator, std::vector<int> inputs);

  const std::string& name() const { return name_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const Op& op() const { return *op_; }
  std::vector<Parameter>& parameters() { return params_; }
  std::vector<StateTensor>& state() { return state_; }
  // The output of the last Forward.
  const Tensor& output() const { return output_; }

  // Before the first Forward: the op becomes one computing more (a fused ReLU) with the same
  // inputs and parameters, and the inputs are renumbered (layers before it were merged).
  void ReplaceOp(std::unique_ptr<Op> op);
  void RenumberInputs(const std::vector<int>& new_index);

  // xs: the shapes of the data inputs.
  absl::StatusOr<Shape> OutputShape(absl::Span<const Shape> xs) const;

  // xs (the data inputs) must stay alive until Backward. Returns the output, valid until the
  // next Forward.
  const Tensor& Forward(Mode mode, absl::Span<const Tensor* const> xs);
  // dy: gradient of the loss w.r.t. the last output. Writes every parameter's grad; returns
  // the gradient w.r.t. each data input whose need_input_grad entry is true (else nullptr):
  // the layer's own buffers, or &dy itself where the op passes its gradient on (a sum).
  absl::Span<const Tensor* const> Backward(const Tensor& dy,
                                           absl::Span<const bool> need_input_grad);

 private:
  void ReadState();  // state_ from the op's

  std::string name_;
  std::unique_ptr<Op> op_;
  std::vector<Parameter> params_;
  std::vector<StateTensor> state_;
  std::vector<int> inputs_;
  std::vector<const Tensor*> xs_;   // data inputs of the last Forward
  std::vector<Shape> input_shapes_;  // of the last Forward, whose output shape output_ holds
  Tensor output_;
  std::vector<Tensor> grad_inputs_;
  std::vector<const Tensor*> grad_input_ptrs_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_LAYER_H_
