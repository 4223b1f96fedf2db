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

Layer::Layer(std::string name, std::unique_ptr<Op> op, std::vector<Parameter> params,
             std::vector<int> inputs)
    : name_(std::move(name)),
      op_(std::move(op)),
      params_(std::move(params)),
      inputs_(std::move(inputs)),
      xs_(inputs_.size(), nullptr) {
  ReadState();
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

void Layer::Forward(Mode mode, absl::Span<const Tensor* const> xs, Tensor* y) {
  absl::InlinedVector<const Tensor*, 4> in(xs.begin(), xs.end());
  for (const Parameter& p : params_) in.push_back(&p.value);
  op_->Forward(mode, in, absl::MakeSpan(&y, 1));
  std::copy(xs.begin(), xs.end(), xs_.begin());
  y_ = y;
}

void Layer::Backward(const Tensor& dy, absl::Span<Tensor* const> grad_xs) {
  COHORT_CHECK(y_ != nullptr, "layer %s: Backward before Forward", name_.c_str());
  absl::InlinedVector<const Tensor*, 4> in(xs_.begin(), xs_.end());
  absl::InlinedVector<Tensor*, 4> grad_in(grad_xs.begin(), grad_xs.end());
  for (Parameter& p : params_) {
    in.push_back(&p.value);
    grad_in.push_back(&p.grad);
  }
  const Tensor* grad_out = &dy;
  op_->Backward(in, absl::MakeConstSpan(&y_, 1), absl::MakeConstSpan(&grad_out, 1), grad_in);
}

}  // namespace cohort
