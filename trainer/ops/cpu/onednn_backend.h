#ifndef COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_
#define COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_

#include <memory>

#include "trainer/ops/op.h"

namespace cohort {

// The CPU backend: every op runs as oneDNN 2.6 primitives on F32 host tensors in plain
// row-major layouts (NCHW activations, OIHW/OI weights), the layouts the kvstore and the
// export use. Primitives are built once per input shape and reused across steps; oneDNN
// spreads each primitive over the OpenMP threads of the calling thread: all cores unless
// OMP_NUM_THREADS says less, or `threads` once BindCallingThread ran (one of several contexts).
// Loops of its own only where oneDNN has no primitive: the loss's label gather, batch norm's
// running-statistics update, dropout, the ResNet subsample-pad shortcut and gradient copies.
// Concatenation is the Backend's block copies: 2.5 times faster here than oneDNN 2.6's concat
// primitive (simple:any), which has no split for the backward (reorders from channel slices
// run 15 times slower than the copies).
class OnednnBackend final : public Backend {
 public:
  // threads: OpenMP threads for threads that BindCallingThread prepared; 0 leaves them alone.
  explicit OnednnBackend(int threads = 0);
  ~OnednnBackend() override;

  absl::string_view name() const override { return "onednn"; }
  DType dtype() const override { return DType::kF32; }
  void BindCallingThread() override;

  std::unique_ptr<Op> Conv2d(const Conv2dSpec& spec) override;
  std::unique_ptr<Op> MaxPool2d(const Pool2dSpec& spec) override;
  std::unique_ptr<Op> AvgPool2d(const Pool2dSpec& spec) override;
  std::unique_ptr<Op> GlobalAvgPool() override;
  std::unique_ptr<Op> BatchNorm(const BatchNormSpec& spec) override;
  std::unique_ptr<Op> Add() override;
  std::unique_ptr<Op> Dropout(const DropoutSpec& spec) override;
  std::unique_ptr<Op> SubsamplePad(const SubsamplePadSpec& spec) override;
  std::unique_ptr<Op> Relu() override;
  std::unique_ptr<Op> Linear() override;
  std::unique_ptr<Op> SoftmaxCrossEntropy() override;

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
