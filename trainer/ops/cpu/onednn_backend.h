#ifndef COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_
#define COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_

#include <memory>

#include "trainer/ops/op.h"

namespace cohort {

// The CPU backend: every op runs as oneDNN 2.6 primitives on F32 host tensors in plain
// row-major layouts (NCHW activations, OIHW/OI weights), the layouts the kvstore and the
// export use. Primitives are built once per input shape and reused across steps; oneDNN
// spreads each primitive over the OpenMP threads (all cores unless OMP_NUM_THREADS says less).
// The only loops of its own are the loss's label gather, which oneDNN has no primitive for.
class OnednnBackend final : public Backend {
 public:
  OnednnBackend();
  ~OnednnBackend() override;

  absl::string_view name() const override { return "onednn"; }
  DType dtype() const override { return DType::kF32; }

  std::unique_ptr<Op> Conv2d(const Conv2dSpec& spec) override;
  std::unique_ptr<Op> MaxPool2d(const Pool2dSpec& spec) override;
  std::unique_ptr<Op> Relu() override;
  std::unique_ptr<Op> Linear() override;
  std::unique_ptr<Op> SoftmaxCrossEntropy() override;

  struct Context;  // engine + stream, shared by the ops this backend makes

 private:
  std::shared_ptr<Context> ctx_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_CPU_ONEDNN_BACKEND_H_
