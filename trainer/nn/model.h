#ifndef COHORT_TRAINER_NN_MODEL_H_
#define COHORT_TRAINER_NN_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/nn/layer.h"

namespace cohort {

// A graph of layers mapping images to class logits: each layer reads the model input or
// earlier layers' outputs (a chain, or residual blocks), the last layer gives the logits.
// Where an output feeds several layers, backward sums their gradients. The step's data
// tensors (every layer's output, every gradient between layers) lie in one arena, placed by a
// plan of their lifetimes (PlanMemory): an output lives until its last reader ran (its
// readers' forwards, and the backwards that read it, Op::ReadsInBackward), a gradient until
// the backward of the layer it belongs to; then its memory serves later tensors. The two hooks the
// distributed runtime and device backends attach to:
//  - before-forward: called before each layer's forward with the layer's index, so a worker
//    can wait there for that layer's freshly pulled parameters (first layer first);
//  - gradient-ready: called for each parameter as soon as backward has produced its final
//    gradient (last layer first), so a worker can push it while backward goes on.
// Not thread-safe; the hooks run on the calling thread.
class Model {
 public:
  using BeforeForwardHook = std::function<void(int layer_index, Layer& layer)>;
  using GradientReadyHook = std::function<void(Parameter& param)>;

  // input_shape: one sample, (C, H, W). Layers come in order: each reads only earlier ones.
  // Fails with the layer's name when shapes don't fit or an output goes unused. backend makes
  // the adds that sum gradients where an output feeds several layers, and fuses a ReLU into
  // the layer before it where it can (Backend::FuseRelu): the two are then one layer.
  static absl::StatusOr<std::unique_ptr<Model>> Create(std::string name, Shape input_shape,
                                                       std::vector<std::unique_ptr<Layer>> layers,
                                                       Backend* backend);

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }
  int num_classes() const { return num_classes_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) { return *layers_[i]; }
  // All parameters in model order (the kvstore key of each is its index here).
  const std::vector<Parameter*>& parameters() const { return params_; }
  // State that is not trained (batch-norm running statistics), in model order.
  const std::vector<StateTensor>& state() const { return state_; }
  // What the model file holds, in its order: each layer's parameters, then its state.
  std::vector<StateTensor> ExportedTensors() const;
  int64_t num_parameter_elements() const;

  void InitParameters(uint64_t seed);
  void SetBeforeForwardHook(BeforeForwardHook hook) { before_forward_ = std::move(hook); }
  void SetGradientReadyHook(GradientReadyHook hook) { gradient_ready_ = std::move(hook); }

  // images: (N, C, H, W) F32 on the host, or already in the backend's input form (which the
  // first layer then reads again in Backward: keep it alive until then) → logits (N, K), owned
  // by the model until the next Forward.
  const Tensor& Forward(Mode mode, const Tensor& images);
  // dlogits: (N, K). Writes every parameter's grad. Follows a kTrain Forward.
  void Backward(const Tensor& dlogits);

  // Bytes of the arena the last Forward's plan placed its step's data tensors in.
  int64_t planned_bytes() const { return planned_bytes_; }

 private:
  // A gradient summed from two of a layer's readers: buffers[target] = a + b (a may be target).
  struct GradientSum {
    int layer;  // whose output's gradient it is (its adder)
    int target, a, b;
  };
  struct StepBuffers;  // a plan under way (model.cc)
  // Buffer indices that stand for the loss's gradient Backward is given, and for none.
  static constexpr int kDlogits = -1;
  static constexpr int kNone = -2;

  Model(std::string name, Shape input_shape, int num_classes,
        std::vector<std::unique_ptr<Layer>> layers, Backend* backend);
  // Places the data tensors of a step in this mode on inputs of this shape (once per change).
  void Plan(Mode mode, const Shape& input);
  // The plan's parts: every layer's output, read by the forwards after it; in training, the
  // backwards that read outputs and the gradients between layers (dy_buffer_ and after).
  void PlanOutputs(const Shape& input, StepBuffers* step);
  void PlanGradients(bool train, StepBuffers* step);
  int BackwardMoment(int layer) const;
  const Tensor* Buffer(int index, const Tensor& dlogits) const;

  std::string name_;
  Shape input_shape_;
  int num_classes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  Backend* backend_;
  Tensor input_;  // the images in the backend's input form, where it differs
  std::vector<Parameter*> params_;
  std::vector<StateTensor> state_;
  // Per layer whose output feeds several: the add op summing its gradients.
  std::vector<std::unique_ptr<Op>> grad_adders_;

  // The plan of the last Forward: for (planned_mode_, planned_input_), views into arena_.
  bool planned_ = false;
  Mode planned_mode_ = Mode::kTrain;
  Shape planned_input_;
  int64_t planned_bytes_ = 0;
  Tensor arena_;
  std::vector<Tensor> buffers_;
  std::vector<int> output_buffer_;  // per layer
  // Backward, per layer: the buffer of its output's gradient, those its op writes for its
  // inputs (kNone: none), whether it runs at all (a sum only hands its gradient on), and the
  // sums that follow it.
  std::vector<int> dy_buffer_;
  std::vector<std::vector<int>> grad_in_buffers_;
  std::vector<bool> runs_backward_;
  std::vector<std::vector<GradientSum>> sums_after_;

  std::vector<const Tensor*> layer_inputs_;  // scratch for Forward
  std::vector<Tensor*> grad_targets_;        // scratch for Backward
  BeforeForwardHook before_forward_;
  GradientReadyHook gradient_ready_;
};

// Builds a Model layer by layer, inferring each layer's input size from the previous one.
// Errors (a kernel larger than the image, ...) surface from Build().
class ModelBuilder {
 public:
  // input_shape: one sample, (C, H, W).
  ModelBuilder(Backend* backend, std::string name, Shape input_shape);

  // Each call adds a layer reading the current one (at first the model input) and makes it
  // current. current() and From() build branches: remember a layer, go on from another.
  int current() const { return current_; }
  ModelBuilder& From(int layer);

  ModelBuilder& Conv2d(const std::string& name, int out_channels, int kernel, int stride,
                       int padding, bool bias = true);
  ModelBuilder& BatchNorm(const std::string& name, float eps = BatchNormSpec().eps);
  ModelBuilder& MaxPool2d(const std::string& name, int kernel, int stride, int padding = 0,
                          bool ceil_mode = false);
  ModelBuilder& AvgPool2d(const std::string& name, int kernel, int stride, int padding = 0);
  ModelBuilder& GlobalAvgPool(const std::string& name);
  ModelBuilder& Relu(const std::string& name);
  ModelBuilder& Dropout(const std::string& name, float p);
  ModelBuilder& Flatten(const std::string& name);
  ModelBuilder& Linear(const std::string& name, int out_features);
  // current + other (a residual connection).
  ModelBuilder& Add(const std::string& name, int other);
  // The layers' outputs (N, C_i, H, W) one after another along channels, in the order given
  // (an Inception block's branches).
  ModelBuilder& Concat(const std::string& name, std::vector<int> layers);
  // The parameter-free shortcut between ResNet stages (SubsamplePadSpec).
  ModelBuilder& SubsamplePad(const std::string& name, int stride, int64_t pad_channels);

  absl::StatusOr<std::unique_ptr<Model>> Build();

 private:
  ModelBuilder& Append(const std::string& name, std::unique_ptr<Op> op,
                       std::vector<Parameter> params, std::vector<int> inputs);
  Parameter MakeParameter(const std::string& name, Shape shape, Parameter::Init init,
                          int64_t fan_in) const;
  // The batch-of-one output shape of a layer (or of the model input).
  const Shape& ShapeOf(int layer) const;

  Backend* backend_;
  std::string name_;
  Shape input_shape_;
  Shape input_batch_shape_;  // (1, C, H, W)
  int current_ = Layer::kModelInput;
  absl::Status status_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;  // batch-of-one output shape of each layer
};

}  // namespace cohort

#endif  // COHORT_TRAINER_NN_MODEL_H_
