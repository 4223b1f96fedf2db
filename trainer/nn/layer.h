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
  enum class Init { kZero, kHeUniform };

  std::string name;  // "<layer>.weight", "<layer>.bias"
  Tensor value;
  Tensor grad;
  Init init = Init::kZero;
  int64_t fan_in = 0;  // inputs feeding one output, for kHeUniform
};

// Fills a parameter from (seed, its name): He-uniform, U(±sqrt(6 / fan_in)), for weights
// feeding ReLUs; zeros for biases. Independent of layer order and of the backend's dtype.
void InitParameter(uint64_t seed, Parameter* p);

// One op with its parameters. The op's inputs are {x, parameters...}; its single output is
// the layer's output. The layer owns its output and input-gradient buffers and reuses them
// across steps. Not thread-safe.
class Layer {
 public:
  // dtype: what the op computes in (its backend's dtype).
  Layer(std::string name, std::unique_ptr<Op> op, std::vector<Parameter> params, DType dtype);

  const std::string& name() const { return name_; }
  absl::string_view op_name() const { return op_->name(); }
  std::vector<Parameter>& parameters() { return params_; }

  absl::StatusOr<Shape> OutputShape(const Shape& x) const;

  // x must stay alive until Backward. Returns the output, valid until the next Forward.
  const Tensor& Forward(Mode mode, const Tensor& x);
  // dy: gradient of the loss w.r.t. the last output. Writes every parameter's grad; returns
  // the gradient w.r.t. x when need_input_grad, else nullptr.
  const Tensor* Backward(const Tensor& dy, bool need_input_grad);

 private:
  std::string name_;
  std::unique_ptr<Op> op_;
  std::vector<Parameter> params_;
  const Tensor* input_ = nullptr;
  Shape input_shape_;  // of the last Forward, whose output shape output_ holds
  Tensor output_;
  Tensor grad_input_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_LAYER_H_
