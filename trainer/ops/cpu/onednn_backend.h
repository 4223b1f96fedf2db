#ifndef COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_
#define COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_

#include <memory>

#include "trainer/ops/op.h"

namespace cohort {

// How the CPU backend holds activations between ops.
enum class ActivationLayout {
  // An activation (N, C, H, W) whose channels are a multiple of the block the convolutions pick
  // on this CPU (16 floats with AVX-512, 8 with AVX2) stays in oneDNN's blocked layout
  // (nChw16c, nChw8c) from one op to the next, gradients too: no reorders between convolutions,
  // batch norms, ReLUs, sums and pooling. Any other activation is plain.
  kBlocked,
  // Every activation plain NCHW (the reference's layout); each convolution reorders its own.
  kPlain,
};

// The CPU backend: every op runs as oneDNN 2.6 primitives on F32 host tensors. Parameters, their
// gradients, 2-D activations (the linear layers' and the loss's) and the batch's images stay
// in plain row-major layouts (OIHW/OI weights, NC), the layouts the kvstore and the export use;
// 4-D activations are held as `layout` says, their shapes still reading (N, C, H, W), and are
// made plain where a plain tensor is needed (Flatten, a concatenation of parts held
// differently). Primitives are built once per input shape and reused across steps; oneDNN
// spreads each primitive over the OpenMP threads of the calling thread: all cores unless
// OMP_NUM_THREADS says less, or `threads` once BindCallingThread ran (one of several contexts).
// Loops of its own only where oneDNN has no primitive: the loss's label gather, batch norm's
// running-statistics update, dropout, the ResNet subsample-pad shortcut and gradient copies.
// Concatenation is block copies: 2.5 times faster here than oneDNN 2.6's concat primitive
// (simple:any), which has no split for the backward (reorders from channel slices run 15 times
// slower than the copies).
class OnednnBackend final : public Backend {
 public:
  // threads: OpenMP threads for threads that BindCallingThread prepared; 0 leaves them alone.
  explicit OnednnBackend(int threads = 0, ActivationLayout layout = ActivationLayout::kBlocked);
  ~OnednnBackend() override;

  absl::string_view name() const override { return "onednn"; }
  DType dtype() const override { return DType::kF32; }
  void BindCallingThread() override;
  // Images whose channels are a multiple of the block are reordered into it (never with RGB
  // or grey images).
  const Tensor& ImportImages(const Tensor& images, Tensor* scratch) override;

  // Channels a block of a blocked activation holds; 0 when every activation is plain.
  int channel_block() const;
  // Whether an activation of this shape is held blocked.
  bool HoldsBlocked(const Shape& activation) const;
  // An activation between its plain NCHW form and the form this backend holds it in (a copy
  // where that is plain), for tests and tools that read or write activations themselves.
  void ActivationFromPlain(const Tensor& plain, Tensor* held) const;
  void ActivationToPlain(const Tensor& held, Tensor* plain) const;

  std::unique_ptr<Op> Conv2d(const Conv2dSpec& spec) override;
  std::unique_ptr<Op> MaxPool2d(const Pool2dSpec& spec) override;
  std::unique_ptr<Op> AvgPool2d(const Pool2dSpec& spec) override;
  std::unique_ptr<Op> GlobalAvgPool() override;
  std::unique_ptr<Op> BatchNorm(const BatchNormSpec& spec) override;
  std::unique_ptr<Op> Add() override;
  std::unique_ptr<Op> Concat() override;
  std::unique_ptr<Op> Flatten() override;
  std::unique_ptr<Op> Dropout(const DropoutSpec& spec) override;
  std::unique_ptr<Op> SubsamplePad(const SubsamplePadSpec& spec) override;
  std::unique_ptr<Op> Relu() override;
  std::unique_ptr<Op> Linear() override;
  std::unique_ptr<Op> SoftmaxCrossEntropy() override;
  // Batch norm (fuse_norm_relu) and sums (a post-op) take the ReLU after them.
  std::unique_ptr<Op> FuseRelu(const Op& op) override;

  // Wall time spent inside oneDNN primitives by every op of this backend so far; the rest
  // of a step is framework overhead (the benchmark reports the share).
  double primitive_seconds() const;

  struct Context;  // engine + stream, shared by the ops this backend makes

 private:
  std::shared_ptr<Context> ctx_;
  int threads_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_
