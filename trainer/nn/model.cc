#include "trainer/nn/model.h"

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<Model>> Model::Create(std::string name, Shape input_shape,
                                                     std::vector<std::unique_ptr<Layer>> layers) {
  std::vector<int64_t> dims{1};
  dims.insert(dims.end(), input_shape.dims().begin(), input_shape.dims().end());
  Shape s(dims);
  for (const auto& layer : layers) {
    ASSIGN_OR_RETURN(s, layer->OutputShape(s));
  }
  if (s.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("model ", name, ": the last layer gives ",
                                                   s.ToString(), ", not logits (N, K)"));
  }
  return std::unique_ptr<Model>(
      new Model(std::move(name), std::move(input_shape), static_cast<int>(s[1]), std::move(layers)));
}

Model::Model(std::string name, Shape input_shape, int num_classes,
             std::vector<std::unique_ptr<Layer>> layers)
    : name_(std::move(name)),
      input_shape_(std::move(input_shape)),
      num_classes_(num_classes),
      layers_(std::move(layers)) {
  for (auto& layer : layers_)
    for (Parameter& p : layer->parameters()) params_.push_back(&p);
}

int64_t Model::num_parameter_elements() const {
  int64_t n = 0;
  for (const Parameter* p : params_) n += p->value.numel();
  return n;
}

void Model::InitParameters(uint64_t seed) {
  for (Parameter* p : params_) InitParameter(seed, p);
}

const Tensor& Model::Forward(Mode mode, const Tensor& x) {
  const Tensor* h = &x;
  for (int i = 0; i < num_layers(); ++i) {
    if (before_forward_) before_forward_(i, *layers_[i]);
    h = &layers_[i]->Forward(mode, *h);
  }
  return *h;
}

void Model::Backward(const Tensor& dlogits) {
  const Tensor* dy = &dlogits;
  for (int i = num_layers() - 1; i >= 0; --i) {
    dy = layers_[i]->Backward(*dy, /*need_input_grad=*/i > 0);
    if (gradient_ready_) {
      for (Parameter& p : layers_[i]->parameters()) gradient_ready_(p);
    }
  }
}

ModelBuilder::ModelBuilder(Backend* backend, std::string name, Shape input_shape)
    : backend_(backend), name_(std::move(name)), input_shape_(std::move(input_shape)) {
  std::vector<int64_t> dims{1};
  dims.insert(dims.end(), input_shape_.dims().begin(), input_shape_.dims().end());
  current_ = Shape(dims);
}

Parameter ModelBuilder::MakeParameter(const std::string& name, Shape shape, Parameter::Init init,
                                      int64_t fan_in) const {
  Parameter p;
  p.name = name;
  p.value = Tensor(shape, backend_->dtype(), backend_->allocator());
  p.grad = Tensor(shape, backend_->dtype(), backend_->allocator());
  p.value.SetZero();
  p.grad.SetZero();
  p.init = init;
  p.fan_in = fan_in;
  return p;
}

ModelBuilder& ModelBuilder::Add(std::unique_ptr<Layer> layer) {
  if (!status_.ok()) return *this;
  auto next = layer->OutputShape(current_);
  if (!next.ok()) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("model ", name_, ": ", next.status().message()));
    return *this;
  }
  current_ = *next;
  layers_.push_back(std::move(layer));
  return *this;
}

ModelBuilder& ModelBuilder::Conv2d(const std::string& name, int out_channels, int kernel,
                                   int stride, int padding) {
  if (current_.rank() != 4) {
    status_.Update(absl::InvalidArgumentError(
        absl::StrCat("model ", name_, ": conv ", name, " needs (N,C,H,W), gets ", current_.ToString())));
    return *this;
  }
  const int64_t in_channels = current_[1];
  const int64_t fan_in = in_channels * kernel * kernel;
  std::vector<Parameter> params;
  params.push_back(MakeParameter(name + ".weight", Shape{out_channels, in_channels, kernel, kernel},
                                 Parameter::Init::kHeUniform, fan_in));
  params.push_back(MakeParameter(name + ".bias", Shape{out_channels}, Parameter::Init::kZero, 0));
  return Add(std::make_unique<Layer>(name, backend_->Conv2d({stride, padding}), std::move(params),
                                     backend_->dtype()));
}

ModelBuilder& ModelBuilder::MaxPool2d(const std::string& name, int kernel, int stride,
                                      int padding) {
  return Add(std::make_unique<Layer>(name, backend_->MaxPool2d({kernel, stride, padding}),
                                     std::vector<Parameter>{}, backend_->dtype()));
}

ModelBuilder& ModelBuilder::Relu(const std::string& name) {
  return Add(std::make_unique<Layer>(name, backend_->Relu(), std::vector<Parameter>{},
                                     backend_->dtype()));
}

ModelBuilder& ModelBuilder::Flatten(const std::string& name) {
  return Add(std::make_unique<Layer>(name, backend_->Flatten(), std::vector<Parameter>{},
                                     backend_->dtype()));
}

ModelBuilder& ModelBuilder::Linear(const std::string& name, int out_features) {
  if (current_.rank() != 2) {
    status_.Update(absl::InvalidArgumentError(absl::StrCat(
        "model ", name_, ": linear ", name, " needs (N, features), gets ", current_.ToString())));
    return *this;
  }
  const int64_t in_features = current_[1];
  std::vector<Parameter> params;
  params.push_back(MakeParameter(name + ".weight", Shape{out_features, in_features},
                                 Parameter::Init::kHeUniform, in_features));
  params.push_back(MakeParameter(name + ".bias", Shape{out_features}, Parameter::Init::kZero, 0));
  return Add(std::make_unique<Layer>(name, backend_->Linear(), std::move(params),
                                     backend_->dtype()));
}

absl::StatusOr<std::unique_ptr<Model>> ModelBuilder::Build() {
  RETURN_IF_ERROR(status_);
  return Model::Create(name_, input_shape_, std::move(layers_));
}

}  // namespace cohort
