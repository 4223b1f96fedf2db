#ifndef COHORT_TRAINER_NN_MODEL_H_
#define COHORT_TRAINER_NN_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/nn/layer.h"

namespace cohort {

// A chain of layers mapping images to class logits, with the two hooks the distributed
// runtime and device backends attach to:
//  - before-forward: called before each layer's forward with the layer's index, so a worker
//    can wait there for that layer's freshly pulled parameters (first layer first);
//  - gradient-ready: called for each parameter as soon as backward has produced its final
//    gradient (last layer first), so a worker can push it while backward goes on.
// Not thread-safe; the hooks run on the calling thread.
class Model {
 public:
  using BeforeForwardHook = std::function<void(int layer_index, Layer& layer)>;
  using GradientReadyHook = std::function<void(Parameter& param)>;

  // input_shape: one sample, (C, H, W). Fails with the layer's name when shapes don't chain.
  static absl::StatusOr<std::unique_ptr<Model>> Create(std::string name, Shape input_shape,
                                                       std::vector<std::unique_ptr<Layer>> layers);

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }
  int num_classes() const { return num_classes_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) { return *layers_[i]; }
  // All parameters in model order (the kvstore key of each is its index here).
  const std::vector<Parameter*>& parameters() const { return params_; }
  int64_t num_parameter_elements() const;

  void InitParameters(uint64_t seed);
  void SetBeforeForwardHook(BeforeForwardHook hook) { before_forward_ = std::move(hook); }
  void SetGradientReadyHook(GradientReadyHook hook) { gradient_ready_ = std::move(hook); }

  // x: (N, C, H, W) → logits (N, K), owned by the model until the next Forward.
  const Tensor& Forward(Mode mode, const Tensor& x);
  // dlogits: (N, K). Writes every parameter's grad.
  void Backward(const Tensor& dlogits);

 private:
  Model(std::string name, Shape input_shape, int num_classes,
        std::vector<std::unique_ptr<Layer>> layers);

  std::string name_;
  Shape input_shape_;
  int num_classes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Parameter*> params_;
  BeforeForwardHook before_forward_;
  GradientReadyHook gradient_ready_;
};

// Builds a Model layer by layer, inferring each layer's input size from the previous one.
// Errors (a kernel larger than the image, ...) surface from Build().
class ModelBuilder {
 public:
  // input_shape: one sample, (C, H, W).
  ModelBuilder(Backend* backend, std::string name, Shape input_shape);

  ModelBuilder& Conv2d(const std::string& name, int out_channels, int kernel, int stride,
                       int padding);
  ModelBuilder& MaxPool2d(const std::string& name, int kernel, int stride, int padding = 0);
  ModelBuilder& Relu(const std::string& name);
  ModelBuilder& Flatten(const std::string& name);
  ModelBuilder& Linear(const std::string& name, int out_features);

  absl::StatusOr<std::unique_ptr<Model>> Build();

 private:
  ModelBuilder& Add(std::unique_ptr<Layer> layer);
  Parameter MakeParameter(const std::string& name, Shape shape, Parameter::Init init,
                          int64_t fan_in) const;

  Backend* backend_;
  std::string name_;
  Shape input_shape_;
  Shape current_;  // a batch-of-one shape (1, ...) flowing through the layers added so far
  absl::Status status_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_MODEL_H_
