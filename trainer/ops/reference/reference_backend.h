#ifndef COHORT_TRAINER_OPS_REFERENCE_REFERENCE_BACKEND_H_
#define COHORT_TRAINER_OPS_REFERENCE_REFERENCE_BACKEND_H_

#include "trainer/ops/op.h"

namespace cohort {

// Plain loops in double precision, written for clarity, not speed: the definition every fast
// backend is tested against. Tensors are F64 on the host. Flatten and Concat are the Backend's
// own host copies.
class ReferenceBackend final : public Backend {
 public:
  absl::string_view name() const override { return "reference"; }
  DType dtype() const override { return DType::kF64; }

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
};

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_REFERENCE_REFERENCE_BACKEND_H_
