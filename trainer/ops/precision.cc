#include "trainer/ops/precision.h"

#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "tf32") return Precision::kTf32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  return absl::InvalidArgumentError(
      absl::StrCat("--precision=", name, ": expected fp32, tf32, bf16 or fp16"));
}

std::string PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

DType StorageDType(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return DType::kBF16;
    case Precision::kFp16: return DType::kF16;
    default: return DType::kF32;
  }
}

}  // namespace cohort
