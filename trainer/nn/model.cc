#include "trainer/nn/model.h"

#include "absl/strings/str_cat.h"
#include "trainer/base/random.h"
#include "trainer/base/status_macros.h"
#include "trainer/nn/memory_plan.h"

namespace cohort {
namespace {

Shape WithBatchOfOne(const Shape& sample) {
  std::vector<int64_t> dims{1};
  dims.insert(dims.end(), sample.dims().begin(), sample.dims().end());
  return Shape(dims);
}

// Merges each ReLU into the layer before it where the backend has that op with the ReLU fused
// and the ReLU is the only reader of its output: the merged layer gives what the ReLU gave,
// and the ReLU's readers read it. Layers that read an earlier one out of range are left for
// Create to refuse.
void FuseRelus(Backend* backend, std::vector<std::unique_ptr<Layer>>* layers) {
  const int count = static_cast<int>(layers->size());
  std::vector<int> readers(count, 0);
  for (int i = 0; i < count; ++i) {
    for (int in : (*layers)[i]->inputs()) {
      if (in < Layer::kModelInput || in >= i) return;
      if (in != Layer::kModelInput) ++readers[in];
    }
  }
  std::vector<bool> merged(count, false);
  std::vector<int> new_index(count);
  int next = 0;
  for (int i = 0; i < count; ++i) {
    const Layer& layer = *(*layers)[i];
    const int before = layer.inputs().size() == 1 ? layer.inputs()[0] : Layer::kModelInput;
    if (layer.op().name() == "relu" && before != Layer::kModelInput && readers[before] == 1) {
      if (std::unique_ptr<Op> fused = backend->FuseRelu((*layers)[before]->op())) {
        (*layers)[before]->ReplaceOp(std::move(fused));
        merged[i] = true;
        new_index[i] = new_index[before];
        continue;
      }
    }
    new_index[i] = next++;
  }
  std::vector<std::unique_ptr<Layer>> kept;
  for (int i = 0; i < count; ++i) {
    if (merged[i]) continue;
    (*layers)[i]->RenumberInputs(new_index);
    kept.push_back(std::move((*layers)[i]));
  }
  *layers = std::move(kept);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(std::string name, Shape input_shape,
                                                     std::vector<std::unique_ptr<Layer>> layers,
                                                     Backend* backend) {
  if (layers.empty()) return absl::InvalidArgumentError(absl::StrCat("model ", name, " has no layers"));
  FuseRelus(backend, &layers);
  const Shape input = WithBatchOfOne(input_shape);
  std::vector<Shape> shapes;
  std::vector<int> consumers(layers.size(), 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    std::vector<Shape> xs;
    for (int in : layers[i]->inputs()) {
      if (in < Layer::kModelInput || in >= static_cast<int>(i)) {
        return absl::InvalidArgumentError(absl::StrCat("model ", name, ": layer ",
                                                       layers[i]->name(), " reads layer ", in,
                                                       ", which does not come before it"));
      }
      xs.push_back(in == Layer::kModelInput ? input : shapes[in]);
      if (in != Layer::kModelInput) ++consumers[in];
    }
    ASSIGN_OR_RETURN(Shape s, layers[i]->OutputShape(xs));
    shapes.push_back(s);
  }
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    if (consumers[i] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("model ", name, ": the output of layer ",
                                                     layers[i]->name(), " is never used"));
    }
  }
  if (shapes.back().rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("model ", name, ": the last layer gives ",
                                                   shapes.back().ToString(),
                                                   ", not logits (N, K)"));
  }
  auto model = std::unique_ptr<Model>(new Model(std::move(name), std::move(input_shape),
                                                static_cast<int>(shapes.back()[1]),
                                                std::move(layers), backend));
  for (size_t i = 0; i < consumers.size(); ++i) {
    if (consumers[i] > 1) model->grad_adders_[i] = backend->Add();
  }
  return model;
}

Model::Model(std::string name, Shape input_shape, int num_classes,
             std::vector<std::unique_ptr<Layer>> layers, Backend* backend)
    : name_(std::move(name)),
      input_shape_(std::move(input_shape)),
      num_classes_(num_classes),
      layers_(std::move(layers)),
      backend_(backend),
      input_(Shape{0}, backend->dtype(), backend->allocator()),
      grad_adders_(layers_.size()),
      arena_(Shape{0}, backend->dtype(), backend->allocator()) {
  for (auto& layer : layers_) {
    for (Parameter& p : layer->parameters()) params_.push_back(&p);
    for (const StateTensor& s : layer->state()) state_.push_back(s);
  }
}

int64_t Model::num_parameter_elements() const {
  int64_t n = 0;
  for (const Parameter* p : params_) n += p->value.numel();
  return n;
}

std::vector<StateTensor> Model::ExportedTensors() const {
  std::vector<StateTensor> tensors;
  for (const auto& layer : layers_) {
    for (Parameter& p : layer->parameters()) tensors.push_back({p.name, &p.value});
    for (const StateTensor& s : layer->state()) tensors.push_back(s);
  }
  return tensors;
}

void Model::InitParameters(uint64_t seed) {
  for (Parameter* p : params_) InitParameter(seed, p);
}

// The buffers of one step as they are planned: each one's bytes, shape and life. Moments:
// layer i's forward runs at i, its backward at 2n − 1 − i; a buffer is alive from the moment
// it is written to the last moment it is read.
struct Model::StepBuffers {
  size_t element;  // bytes of one element
  std::vector<BufferLife> lives;
  std::vector<Shape> shapes;

  int Add(const Shape& shape, int moment) {
    lives.push_back({shape.numel() * static_cast<int64_t>(element), moment, moment});
    shapes.push_back(shape);
    return static_cast<int>(lives.size()) - 1;
  }
  // buffer < 0 stands for a tensor the plan does not hold (the loss's gradient).
  void Read(int buffer, int moment) {
    if (buffer >= 0) lives[buffer].last = std::max(lives[buffer].last, moment);
  }
};

void Model::Plan(Mode mode, const Shape& input) {
  if (planned_ && mode == planned_mode_ && input == planned_input_) return;
  const int n = num_layers();
  StepBuffers step{DTypeSize(backend_->dtype())};
  PlanOutputs(input, &step);
  // The caller reads the logits after Forward, and may until the step ends.
  step.Read(output_buffer_[n - 1], mode == Mode::kTrain ? BackwardMoment(0) : n - 1);
  PlanGradients(mode == Mode::kTrain, &step);

  const MemoryPlan plan = PlanMemory(step.lives);
  arena_.Resize(Shape{plan.arena_bytes / static_cast<int64_t>(step.element)});
  buffers_.clear();
  for (size_t b = 0; b < step.lives.size(); ++b) {
    buffers_.push_back(Tensor::Borrow(static_cast<char*>(arena_.raw()) + plan.offsets[b],
                                      step.shapes[b], backend_->dtype(), backend_->allocator()));
  }
  planned_ = true;
  planned_mode_ = mode;
  planned_input_ = input;
  planned_bytes_ = plan.arena_bytes;
}

int Model::BackwardMoment(int layer) const { return 2 * num_layers() - 1 - layer; }

void Model::PlanOutputs(const Shape& input, StepBuffers* step) {
  output_buffer_.assign(num_layers(), 0);
  std::vector<Shape> xs;
  for (int i = 0; i < num_layers(); ++i) {
    const Layer& layer = *layers_[i];
    xs.clear();
    for (int in : layer.inputs()) {
      xs.push_back(in == Layer::kModelInput ? input : step->shapes[output_buffer_[in]]);
      if (in != Layer::kModelInput) step->Read(output_buffer_[in], i);
    }
    // Shapes were validated when the model was built; another batch size only scales them.
    auto shape = layer.OutputShape(xs);
    COHORT_CHECK(shape.ok(), "%s", std::string(shape.status().message()).c_str());
    output_buffer_[i] = step->Add(*shape, i);
  }
}

void Model::PlanGradients(bool train, StepBuffers* step) {
  const int n = num_layers();
  dy_buffer_.assign(n, kDlogits);
  grad_in_buffers_.assign(n, {});
  runs_backward_.assign(n, false);
  sums_after_.assign(n, {});
  if (!train) return;
  for (int i = 0; i < n; ++i) {
    const BackwardReads reads = layers_[i]->op().ReadsInBackward();
    if (reads.output) step->Read(output_buffer_[i], BackwardMoment(i));
    for (int in : layers_[i]->inputs()) {
      if (reads.inputs && in != Layer::kModelInput) {
        step->Read(output_buffer_[in], BackwardMoment(i));
      }
    }
  }
  // Each output's gradient as it stands while backward goes on: the first reader's, then the
  // sum with each further reader's.
  std::vector<int> grad(n, kNone), sum(n, kNone);
  grad[n - 1] = kDlogits;
  for (int i = n - 1; i >= 0; --i) {
    const Layer& layer = *layers_[i];
    const int t = BackwardMoment(i);
    dy_buffer_[i] = grad[i];
    step->Read(grad[i], t);
    const bool hands_on =
        layer.op().InputGradientsAreOutputGradient() && layer.parameters().empty();
    runs_backward_[i] = !hands_on;
    grad_in_buffers_[i].assign(layer.inputs().size(), kNone);
    int shared = kNone;
    for (size_t k = 0; k < layer.inputs().size(); ++k) {
      const int j = layer.inputs()[k];
      if (j == Layer::kModelInput) continue;
      int g = hands_on ? grad[i] : shared;
      if (g == kNone) {
        g = grad_in_buffers_[i][k] = step->Add(step->shapes[output_buffer_[j]], t);
        if (layer.op().InputsShareOneGradient()) shared = g;
      }
      if (grad[j] == kNone) {
        grad[j] = g;
        continue;
      }
      if (sum[j] == kNone) sum[j] = step->Add(step->shapes[output_buffer_[j]], t);
      sums_after_[i].push_back({j, sum[j], grad[j], g});
      step->Read(grad[j], t);
      step->Read(g, t);
      grad[j] = sum[j];
    }
  }
}

const Tensor* Model::Buffer(int index, const Tensor& dlogits) const {
  return index == kDlogits ? &dlogits : &buffers_[index];
}

const Tensor& Model::Forward(Mode mode, const Tensor& images) {
  const Tensor& x = backend_->ImportImages(images, &input_);
  Plan(mode, x.shape());
  for (int i = 0; i < num_layers(); ++i) {
    if (before_forward_) before_forward_(i, *layers_[i]);
    layer_inputs_.clear();
    for (int in : layers_[i]->inputs()) {
      layer_inputs_.push_back(in == Layer::kModelInput ? &x : &buffers_[output_buffer_[in]]);
    }
    layers_[i]->Forward(mode, layer_inputs_, &buffers_[output_buffer_[i]]);
  }
  return buffers_[output_buffer_.back()];
}

void Model::Backward(const Tensor& dlogits) {
  COHORT_CHECK(planned_ && planned_mode_ == Mode::kTrain,
               "model %s: Backward without a training Forward before it", name_.c_str());
  for (int i = num_layers() - 1; i >= 0; --i) {
    Layer& layer = *layers_[i];
    if (runs_backward_[i]) {
      grad_targets_.clear();
      for (int b : grad_in_buffers_[i]) {
        grad_targets_.push_back(b == kNone ? nullptr : &buffers_[b]);
      }
      layer.Backward(*Buffer(dy_buffer_[i], dlogits), grad_targets_);
    }
    if (gradient_ready_) {
      for (Parameter& p : layer.parameters()) gradient_ready_(p);
    }
    for (const GradientSum& s : sums_after_[i]) {
      const Tensor* in[] = {Buffer(s.a, dlogits), Buffer(s.b, dlogits)};
      Tensor* out = &buffers_[s.target];
      grad_adders_[s.layer]->Forward(Mode::kEval, in, absl::MakeSpan(&out, 1));
    }
  }
}

ModelBuilder::ModelBuilder(Backend* backend, std::string name, Shape input_shape)
    : backend_(backend),
      name_(std::move(name)),
      input_shape_(std::move(input_shape)),
      input_batch_shape_(WithBatchOfOne(input_shape_)) {}

const Shape& ModelBuilder::ShapeOf(int layer) const {
  return layer == Layer::kModelInput ? input_batch_shape_ : shapes_[layer];
}

ModelBuilder& ModelBuilder::From(int layer) {
  if (layer < Layer::kModelInput || layer >= static_cast<int>(layers_.size())) {
    status_.Update(absl::InvalidArgumentError(
        absl::StrCat("model ", name_, ": no layer ", layer, " to go on from")));
    return *this;
  }
  current_ = layer;
  return *this;
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

ModelBuilder& ModelBuilder::Append(const std::string& name, std::unique_ptr<Op> op,
                                   std::vector<Parameter> params, std::vector<int> inputs) {
  if (!status_.ok()) return *this;
  auto layer = std::make_unique<Layer>(name, std::move(op), std::move(params), inputs);
  std::vector<Shape> xs;
  for (int in : inputs) xs.push_back(ShapeOf(in));
  auto next = layer->OutputShape(xs);
  if (!next.ok()) {
    status_ = absl::InvalidArgumentError(absl::StrCat("model ", name_, ": ", next.status().message()));
    return *this;
  }
  shapes_.push_back(*next);
  layers_.push_back(std::move(layer));
  current_ = static_cast<int>(layers_.size()) - 1;
  return *this;
}

ModelBuilder& ModelBuilder::Conv2d(const std::string& name, int out_channels, int kernel,
                                   int stride, int padding, bool bias) {
  const Shape& x = ShapeOf(current_);
  if (x.rank() != 4) {
    status_.Update(absl::InvalidArgumentError(
        absl::StrCat("model ", name_, ": conv ", name, " needs (N,C,H,W), gets ", x.ToString())));
    return *this;
  }
  const int64_t in_channels = x[1];
  std::vector<Parameter> params;
  params.push_back(MakeParameter(name + ".weight", Shape{out_channels, in_channels, kernel, kernel},
                                 Parameter::Init::kHeUniform, in_channels * kernel * kernel));
  if (bias) {
    params.push_back(MakeParameter(name + ".bias", Shape{out_channels}, Parameter::Init::kZero, 0));
  }
  return Append(name, backend_->Conv2d({stride, padding, bias}), std::move(params), {current_});
}

ModelBuilder& ModelBuilder::BatchNorm(const std::string& name, float eps) {
  const Shape& x = ShapeOf(current_);
  if (x.rank() != 4) {
    status_.Update(absl::InvalidArgumentError(absl::StrCat(
        "model ", name_, ": batch norm ", name, " needs (N,C,H,W), gets ", x.ToString())));
    return *this;
  }
  std::vector<Parameter> params;
  params.push_back(MakeParameter(name + ".weight", Shape{x[1]}, Parameter::Init::kOne, 0));
  params.push_back(MakeParameter(name + ".bias", Shape{x[1]}, Parameter::Init::kZero, 0));
  return Append(name, backend_->BatchNorm({x[1], eps}), std::move(params), {current_});
}

ModelBuilder& ModelBuilder::MaxPool2d(const std::string& name, int kernel, int stride,
                                      int padding, bool ceil_mode) {
  return Append(name, backend_->MaxPool2d({kernel, stride, padding, ceil_mode}), {}, {current_});
}

ModelBuilder& ModelBuilder::AvgPool2d(const std::string& name, int kernel, int stride,
                                      int padding) {
  return Append(name, backend_->AvgPool2d({kernel, stride, padding}), {}, {current_});
}

ModelBuilder& ModelBuilder::GlobalAvgPool(const std::string& name) {
  return Append(name, backend_->GlobalAvgPool(), {}, {current_});
}

ModelBuilder& ModelBuilder::Relu(const std::string& name) {
  return Append(name, backend_->Relu(), {}, {current_});
}

ModelBuilder& ModelBuilder::Dropout(const std::string& name, float p) {
  return Append(name, backend_->Dropout({p, HashName(name)}), {}, {current_});
}

ModelBuilder& ModelBuilder::Flatten(const std::string& name) {
  return Append(name, backend_->Flatten(), {}, {current_});
}

ModelBuilder& ModelBuilder::Linear(const std::string& name, int out_features) {
  const Shape& x = ShapeOf(current_);
  if (x.rank() != 2) {
    status_.Update(absl::InvalidArgumentError(absl::StrCat(
        "model ", name_, ": linear ", name, " needs (N, features), gets ", x.ToString())));
    return *this;
  }
  const int64_t in_features = x[1];
  std::vector<Parameter> params;
  params.push_back(MakeParameter(name + ".weight", Shape{out_features, in_features},
                                 Parameter::Init::kHeUniform, in_features));
  params.push_back(MakeParameter(name + ".bias", Shape{out_features}, Parameter::Init::kZero, 0));
  return Append(name, backend_->Linear(), std::move(params), {current_});
}

ModelBuilder& ModelBuilder::Add(const std::string& name, int other) {
  if (other < Layer::kModelInput || other >= static_cast<int>(layers_.size())) {
    status_.Update(absl::InvalidArgumentError(
        absl::StrCat("model ", name_, ": add ", name, " reads no layer ", other)));
    return *this;
  }
  return Append(name, backend_->Add(), {}, {current_, other});
}

ModelBuilder& ModelBuilder::Concat(const std::string& name, std::vector<int> layers) {
  for (int layer : layers) {
    if (layer < Layer::kModelInput || layer >= static_cast<int>(layers_.size())) {
      status_.Update(absl::InvalidArgumentError(
          absl::StrCat("model ", name_, ": concat ", name, " reads no layer ", layer)));
      return *this;
    }
  }
  return Append(name, backend_->Concat(), {}, std::move(layers));
}

ModelBuilder& ModelBuilder::SubsamplePad(const std::string& name, int stride,
                                         int64_t pad_channels) {
  return Append(name, backend_->SubsamplePad({stride, pad_channels}), {}, {current_});
}

absl::StatusOr<std::unique_ptr<Model>> ModelBuilder::Build() {
  RETURN_IF_ERROR(status_);
  return Model::Create(name_, input_shape_, std::move(layers_), backend_);
}

}  // namespace cohort
