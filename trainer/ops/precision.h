#ifndef COHORT_TRAINER_OPS_PRECISION_H_
#define COHORT_TRAINER_OPS_PRECISION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// What a device computes in (--precision). Master weights, the optimizer and the kvstore stay
// in fp32 whatever it is.
//  - fp32: fp32 storage and arithmetic (the only one on CPUs);
//  - tf32: fp32 storage, matrix products and convolutions on the tensor cores' TF32 mode;
//  - bf16: bf16 activations, weights and gradients, fp32 accumulation;
//  - fp16: as bf16 in fp16, with loss scaling so small gradients do not flush to zero.
enum class Precision { kFp32, kTf32, kBf16, kFp16 };

absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
std::string PrecisionName(Precision precision);
// The dtype activations and parameters are stored in.
DType StorageDType(Precision precision);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_PRECISION_H_
