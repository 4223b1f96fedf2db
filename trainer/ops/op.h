#ifndef COHORT_TRAINER_OPS_OP_H_
#define COHORT_TRAINER_OPS_OP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/ops/parameter_exchange.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

enum class Mode { kTrain, kEval };

// State an op keeps that is not a parameter (batch norm's running statistics): a name suffix
// and the tensor, plain row-major on the backend's device. The model exports it and the
// kvstore averages it across workers; writing into it changes what the op computes.
struct OpState {
  std::string name;  // "running_mean"
  Tensor* value;
};

// Which of its Forward's tensors an op's Backward reads (beyond their shapes).
struct BackwardReads {
  bool inputs = true;  // the data inputs (not the parameters)
  bool output = true;
};

// One differentiable operation. Inputs and outputs come in the op's documented order; the
// caller allocates outputs with OutputShapes() and keeps them, and the inputs, between Forward
// and Backward where ReadsInBackward says Backward reads them.
// An op may keep state from Forward for Backward (a pooling workspace, softmax values) and
// caches its primitives per input shape, so one op instance serves one layer. Not thread-safe.
class Op {
 public:
  virtual ~Op() = default;
  virtual absl::string_view name() const = 0;

  // Output shapes for these input shapes; InvalidArgument naming the op and the shapes when
  // they do not fit together.
  virtual absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const = 0;

  virtual void Forward(Mode mode, absl::Span<const Tensor* const> in,
                       absl::Span<Tensor* const> out) = 0;

  // Writes the gradient of every input whose grad_in entry is non-null (overwriting it), given
  // the gradients of the outputs. Must follow a kTrain Forward on the same inputs.
  virtual void Backward(absl::Span<const Tensor* const> in, absl::Span<const Tensor* const> out,
                        absl::Span<const Tensor* const> grad_out,
                        absl::Span<Tensor* const> grad_in) = 0;

  // What Backward reads of Forward's tensors: a model lets the memory of the others serve
  // other tensors once their forward readers ran. Both by default, which is always safe.
  virtual BackwardReads ReadsInBackward() const { return {}; }

  // The op's state, in a fixed order; empty for most ops.
  virtual std::vector<OpState> State() { return {}; }

  // True when every input's gradient is the output's gradient itself (a sum): a caller may
  // hand grad_out on instead of calling Backward, which would only copy it.
  virtual bool InputGradientsAreOutputGradient() const { return false; }

  // True when every input's gradient is one and the same tensor (a sum with a fused ReLU):
  // Backward then writes only the first one asked for, and a caller hands it to every input.
  virtual bool InputsShareOneGradient() const { return false; }
};

struct Conv2dSpec {
  int stride = 1;
  int padding = 0;    // zero padding on every side
  bool bias = true;   // false: inputs {x, w}, as the convolutions before a batch norm
};

struct BatchNormSpec {
  int64_t channels = 0;
  float eps = 1e-5f;
  float momentum = 0.1f;  // running = (1 − momentum)·running + momentum·batch statistic
};

// Keeps each element with probability 1 − p and scales kept ones by 1/(1 − p) in kTrain; the
// identity in kEval. The mask of the k-th kTrain Forward is a function of (seed, k).
struct DropoutSpec {
  float p = 0.5f;
  uint64_t seed = 0;
};

// The parameter-free ResNet shortcut ("option A", He et al. 2016) between stages of
// different widths: y[:, c + pad_channels] = x[:, c, ::stride, ::stride], zeros elsewhere.
struct SubsamplePadSpec {
  int stride = 2;
  int64_t pad_channels = 0;  // zero channels added before and after
};

// How an embedding bag pools its rows: their sum, or their mean (an empty bag gives zeros).
struct EmbeddingBagSpec {
  enum class Pooling { kSum, kMean };
  Pooling pooling = Pooling::kSum;
};

struct Pool2dSpec {
  int kernel = 2;
  int stride = 2;
  int padding = 0;
  // PyTorch's ceil_mode (max pooling only): the output side rounds up, adding a last window that
  // reaches past the right (bottom) padding, except where it would start in that padding.
  bool ceil_mode = false;
};

// Makes the ops of one backend. Tensors its ops take are of dtype() and live on its
// allocator's device. Every backend implements every op with the same semantics as the
// reference backend, which the tests hold the others to.
//
// Op signatures (shapes):
//   Conv2d:     in {x (N,C,H,W), w (O,C,KH,KW), b (O)}   out {y (N,O,OH,OW)}   (no b: bias off)
//   MaxPool2d:  in {x (N,C,H,W)}                         out {y (N,C,OH,OW)}   padding never wins
//   AvgPool2d:  in {x (N,C,H,W)}                         out {y (N,C,OH,OW)}   padding counts
//   GlobalAvgPool: in {x (N,C,H,W)}                      out {y (N,C)}
//   BatchNorm:  in {x (N,C,H,W), gamma (C), beta (C)}    out {y (N,C,H,W)}
//               state {running_mean (C), running_var (C)}: kTrain normalises with the batch's
//               mean and biased variance and folds them (variance unbiased) into the running
//               ones; kEval normalises with the running ones.
//   Add:        in {a (any), b (same)}                   out {y = a + b}
//   Concat:     in {x0 (N,C0,H,W), x1 (N,C1,H,W), ...}   out {y (N,C0+C1+...,H,W)}   along channels
//   Dropout:    in {x (any)}                             out {y (same)}
//   SubsamplePad: in {x (N,C,H,W)}                       out {y (N,C+2p,ceil(H/s),ceil(W/s))}
//   Relu:       in {x (any)}                             out {y (same)}
//   Linear:     in {x (N,I), w (O,I), b (O)}             out {y (N,O)}
//   Flatten:    in {x (N,...)}                           out {y (N, prod(...))}
//   SoftmaxCrossEntropy: in {logits (N,K), labels (N) I32}  out {loss () = mean over N}
//   EmbeddingBag: in {rows (U,D), indices (L) I32, offsets (B) I32}   out {y (B,D)}
//               rows: the table rows a batch touches (pulled by id); bag b pools the rows
//               indices[offsets[b] .. offsets[b+1]) (the last bag to L); offsets start at 0
//               and never fall. The gradient is the rows' only (the others' are not asked).
//   DotInteraction: in {x (N,F,D)}                      out {y (N, F(F-1)/2)}
//               every pair of the F feature vectors' dot product, pairs (i, j) with i > j in
//               the order (1,0), (2,0), (2,1), (3,0), ... (DLRM's interaction, self-pairs off)
//   BinaryCrossEntropy: in {logits (N), labels (N) I32 0 or 1}   out {loss () = mean over N}
//               of the sigmoid's cross-entropy, computed stably from the logits
class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::string_view name() const = 0;
  virtual DType dtype() const = 0;
  virtual Allocator* allocator() const { return CpuAllocator(); }
  // Host memory this backend's uploads read straight from (pinned, for a GPU): where the
  // batches it trains on are assembled.
  virtual Allocator* host_allocator() const { return CpuAllocator(); }
  // Prepares the calling thread to run this backend's ops: a worker with several device
  // contexts runs each on a thread of its own (its share of the CPU cores, or its GPU).
  virtual void BindCallingThread() {}

  // The model's input in the form this backend's ops read (dtype, device, memory layout).
  // images: (N, C, H, W) F32 on the host; labels: (N) I32 on the host. Returns the argument
  // itself where it already is that form (the CPU backends), else converts it into *scratch,
  // which the caller keeps until the step's ops are done with it.
  virtual const Tensor& ImportImages(const Tensor& images, Tensor* scratch) { return images; }
  virtual const Tensor& ImportLabels(const Tensor& labels, Tensor* scratch) { return labels; }
  // How the parameters of a model on this backend reach a host kvstore: in place where they
  // already are F32 host tensors (the CPU backends).
  virtual std::unique_ptr<ParameterExchange> MakeParameterExchange(
      std::vector<ParameterTensors> params) {
    return MakeInPlaceExchange(std::move(params));
  }
  // How the replicas of a model on `backends` (this one first), `params` by replica, reach a
  // host kvstore when this backend reduces their gradients itself (several GPUs); nullptr: the
  // host does, through each one's MakeParameterExchange (MakeHostReplicaExchange).
  virtual std::unique_ptr<ReplicaExchange> MakeReplicaExchange(
      const std::vector<Backend*>& backends, std::vector<std::vector<ParameterTensors>> params) {
    return nullptr;
  }

  virtual std::unique_ptr<Op> Conv2d(const Conv2dSpec& spec) = 0;
  virtual std::unique_ptr<Op> MaxPool2d(const Pool2dSpec& spec) = 0;
  virtual std::unique_ptr<Op> AvgPool2d(const Pool2dSpec& spec) = 0;
  virtual std::unique_ptr<Op> GlobalAvgPool() = 0;
  virtual std::unique_ptr<Op> BatchNorm(const BatchNormSpec& spec) = 0;
  virtual std::unique_ptr<Op> Add() = 0;
  // Block copies on the host, for any dtype: the reference's and the CPU backend's; a device
  // backend has its own.
  virtual std::unique_ptr<Op> Concat();
  virtual std::unique_ptr<Op> Dropout(const DropoutSpec& spec) = 0;
  virtual std::unique_ptr<Op> SubsamplePad(const SubsamplePadSpec& spec) = 0;
  virtual std::unique_ptr<Op> Relu() = 0;
  virtual std::unique_ptr<Op> Linear() = 0;
  virtual std::unique_ptr<Op> Flatten();
  virtual std::unique_ptr<Op> SoftmaxCrossEntropy() = 0;
  // Plain loops over host tensors (the reference); a backend whose tensors live elsewhere
  // gives its own.
  virtual std::unique_ptr<Op> EmbeddingBag(const EmbeddingBagSpec& spec);
  virtual std::unique_ptr<Op> DotInteraction();
  virtual std::unique_ptr<Op> BinaryCrossEntropy();

  // An op computing relu(op(...)) in one pass, with op's inputs, parameters and state, where
  // this backend can fuse a ReLU into `op` (an op of its own, fresh); nullptr where it cannot.
  // A model asks for it wherever a ReLU is the only reader of an op's output.
  virtual std::unique_ptr<Op> FuseRelu(const Op& op) { return nullptr; }
};

// Shape rules shared by every backend (the errors name the op and the shapes).
// in: {x, w} or {x, w, b} as spec.bias says.
absl::StatusOr<Shape> Conv2dOutputShape(const Conv2dSpec& spec, absl::Span<const Shape> in);
absl::StatusOr<Shape> Pool2dOutputShape(absl::string_view op, const Pool2dSpec& spec,
                                        const Shape& x);
// One side of a pooling output: floor((in + 2p − k) / s) + 1, or with ceil_mode PyTorch's
// ceil((in + 2p − k) / s) + 1, less one where the last window would start in the padding.
int64_t Pool2dOutputSize(const Pool2dSpec& spec, int64_t in);
absl::StatusOr<Shape> LinearOutputShape(const Shape& x, const Shape& w, const Shape& b);
absl::StatusOr<Shape> SoftmaxCrossEntropyOutputShape(const Shape& logits, const Shape& labels);
absl::StatusOr<Shape> GlobalAvgPoolOutputShape(const Shape& x);
absl::StatusOr<Shape> BatchNormOutputShape(const BatchNormSpec& spec, absl::Span<const Shape> in);
absl::StatusOr<Shape> AddOutputShape(absl::Span<const Shape> in);
absl::StatusOr<Shape> ConcatOutputShape(absl::Span<const Shape> in);
absl::StatusOr<Shape> SubsamplePadOutputShape(const SubsamplePadSpec& spec, const Shape& x);
absl::StatusOr<Shape> EmbeddingBagOutputShape(absl::Span<const Shape> in);
absl::StatusOr<Shape> DotInteractionOutputShape(const Shape& x);
absl::StatusOr<Shape> BinaryCrossEntropyOutputShape(const Shape& logits, const Shape& labels);

// The dropout keep-mask of one kTrain call: mask[i] = 1 with probability 1 − p. Shared by every
// backend so they drop the same elements.
void DropoutMask(const DropoutSpec& spec, uint64_t call, absl::Span<uint8_t> mask);
// Checks that a shape list has the expected length before an op indexes into it.
absl::Status ExpectInputCount(absl::string_view op, absl::Span<const Shape> in, size_t count);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_OP_H_
