#include "trainer/nn/layer.h"

#include <cmath>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "trainer/base/random.h"

namespace cohort {

void InitParameter(uint64_t seed, Parameter* p) {
  Rng rng(MixKeys({seed, HashName(p->name)}));
  const double bound = p->fan_in > 0 ? std::sqrt(6.0 / static_cast<double>(p->fan_in)) : 0.0;
  for (int64_t i = 0; i < p->value.numel(); ++i) {
    const double v = p->init == Parameter::Init::kHeUniform ? rng.Uniform(-bound, bound) : 0.0;
    if (p->value.dtype() == DType::kF64) {
      p->value.data<double>()[i] = v;
    } else {
      p->value.data<float>()[i] = static_cast<float>(v);
    }
  }
}

Layer::Layer(std::string name, std::unique_ptr<Op> op, std::vector<Parameter> params, DType dtype)
    : name_(std::move(name)),
      op_(std::move(op)),
      params_(std::move(params)),
      output_(Shape{0}, dtype),
      grad_input_(Shape{0}, dtype) {}

absl::StatusOr<Shape> Layer::OutputShape(const Shape& x) const {
  std::vector<Shape> in{x};
  for (const Parameter& p : params_) in.push_back(p.value.shape());
  auto out = op_->OutputShapes(in);
  if (!out.ok()) {
    return absl::Status(out.status().code(),
                        absl::StrCat("layer ", name_, ": ", out.status().message()));
  }
  return (*out)[0];
}

const Tensor& Layer::Forward(Mode mode, const Tensor& x) {
  if (x.shape() != input_shape_) {
    // Shapes were validated when the model was built; a batch-size change only resizes.
    auto shape = OutputShape(x.shape());
    COHORT_CHECK(shape.ok(), "%s", std::string(shape.status().message()).c_str());
    output_.Resize(*shape);
    input_shape_ = x.shape();
  }
  absl::InlinedVector<const Tensor*, 4> in{&x};
  for (const Parameter& p : params_) in.push_back(&p.value);
  Tensor* out = &output_;
  op_->Forward(mode, in, absl::MakeSpan(&out, 1));
  input_ = &x;
  return output_;
}

const Tensor* Layer::Backward(const Tensor& dy, bool need_input_grad) {
  COHORT_CHECK(input_ != nullptr, "layer %s: Backward before Forward", name_.c_str());
  absl::InlinedVector<const Tensor*, 4> in{input_};
  absl::InlinedVector<Tensor*, 4> grad_in{need_input_grad ? &grad_input_ : nullptr};
  for (Parameter& p : params_) {
    in.push_back(&p.value);
    grad_in.push_back(&p.grad);
  }
  if (need_input_grad) grad_input_.Resize(input_->shape());
  const Tensor* out = &output_;
  const Tensor* grad_out = &dy;
  op_->Backward(in, absl::MakeConstSpan(&out, 1), absl::MakeConstSpan(&grad_out, 1), grad_in);
  return need_input_grad ? &grad_input_ : nullptr;
}

}  // namespace cohort
