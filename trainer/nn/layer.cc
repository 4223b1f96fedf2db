#include "trainer/nn/layer.h"

#include <cmath>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "trainer/base/random.h"

namespace cohort {

void InitParameter(uint64_t seed, Parameter* p) {
  Rng rng(MixKeys({seed, HashName(p->name)}));
  const double bound = p->fan_in > 0 ? std::sqrt(6.0 / static_cast<double>(p->fan_in)) : 0.0;
  // Drawn in double on the host, then converted to the value's dtype and device.
  Tensor values(p->value.shape(), DType::kF64);
  for (double& v : values.span<double>()) {
    v = 0.0;
    if (p->init == Parameter::Init::kHeUniform) v = rng.Uniform(-bound, bound);
    if (p->init == Parameter::Init::kOne) v = 1.0;
  }
  p->value.CopyFrom(ConvertTo(values, p->value.dtype()));
}

Layer::Layer(std::string name, std::unique_ptr<Op> op, std::vector<Parameter> params, DType dtype,
             Allocator* allocator, std::vector<int> inputs)
    : name_(std::move(name)),
      op_(std::move(op)),
      params_(std::move(params)),
      inputs_(std::move(inputs)),
      xs_(inputs_.size(), nullptr),
      output_(Shape{0}, dtype, allocator),
      grad_input_ptrs_(inputs_.size(), nullptr) {
  ReadState();
  for (size_t i = 0; i < inputs_.size(); ++i) grad_inputs_.emplace_back(Shape{0}, dtype, allocator);
}

void Layer::ReadState() {
  state_.clear();
  for (const OpState& s : op_->State()) state_.push_back({absl::StrCat(name_, ".", s.name), s.value});
}

void Layer::ReplaceOp(std::unique_ptr<Op> op) {
  op_ = std::move(op);
  ReadState();
}

void Layer::RenumberInputs(const std::vector<int>& new_index) {
  for (int& in : inputs_) {
    if (in != kModelInput) in = new_index[in];
  }
}

absl::StatusOr<Shape> Layer::OutputShape(absl::Span<const Shape> xs) const {
  std::vector<Shape> in(xs.begin(), xs.end());
  for (const Parameter& p : params_) in.push_back(p.value.shape());
  auto out = op_->OutputShapes(in);
  if (!out.ok()) {
    return absl::Status(out.status().code(),
                        absl::StrCat("layer ", name_, ": ", out.status().message()));
  }
  return (*out)[0];
}

const Tensor& Layer::Forward(Mode mode, absl::Span<const Tensor* const> xs) {
  bool same_shapes = input_shapes_.size() == xs.size();
  for (size_t i = 0; same_shapes && i < xs.size(); ++i) same_shapes = xs[i]->shape() == input_shapes_[i];
  if (!same_shapes) {
    // Shapes were validated when the model was built; a batch-size change only resizes.
    input_shapes_.clear();
    for (const Tensor* x : xs) input_shapes_.push_back(x->shape());
    auto shape = OutputShape(input_shapes_);
    COHORT_CHECK(shape.ok(), "%s", std::string(shape.status().message()).c_str());
    output_.Resize(*shape);
  }
  absl::InlinedVector<const Tensor*, 4> in(xs.begin(), xs.end());
  for (const Parameter& p : params_) in.push_back(&p.value);
  Tensor* out = &output_;
  op_->Forward(mode, in, absl::MakeSpan(&out, 1));
  std::copy(xs.begin(), xs.end(), xs_.begin());
  return output_;
}

absl::Span<const Tensor* const> Layer::Backward(const Tensor& dy,
                                                absl::Span<const bool> need_input_grad) {
  COHORT_CHECK(!input_shapes_.empty(), "layer %s: Backward before Forward", name_.c_str());
  if (op_->InputGradientsAreOutputGradient() && params_.empty()) {
    for (size_t i = 0; i < xs_.size(); ++i) {
      grad_input_ptrs_[i] = need_input_grad[i] ? &dy : nullptr;
    }
    return grad_input_ptrs_;
  }
  absl::InlinedVector<const Tensor*, 4> in(xs_.begin(), xs_.end());
  absl::InlinedVector<Tensor*, 4> grad_in;
  const bool share = op_->InputsShareOneGradient();
  Tensor* first = nullptr;  // the first gradient asked for: every input's, where they share one
  for (size_t i = 0; i < xs_.size(); ++i) {
    Tensor* g = nullptr;
    if (need_input_grad[i] && (first == nullptr || !share)) {
      g = &grad_inputs_[i];
      g->Resize(xs_[i]->shape());
      if (first == nullptr) first = g;
    }
    grad_in.push_back(g);
    grad_input_ptrs_[i] = need_input_grad[i] ? (g != nullptr ? g : first) : nullptr;
  }
  for (Parameter& p : params_) {
    in.push_back(&p.value);
    grad_in.push_back(&p.grad);
  }
  const Tensor* out = &output_;
  const Tensor* grad_out = &dy;
  op_->Backward(in, absl::MakeConstSpan(&out, 1), absl::MakeConstSpan(&grad_out, 1), grad_in);
  return grad_input_ptrs_;
}

}  // namespace cohort
