#ifndef COHORT_TRAINER_IO_SAFETENSORS_H_
#define COHORT_TRAINER_IO_SAFETENSORS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// The safetensors format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and [begin, end) byte range, then the raw row-major data. We write the
// ranges contiguously in the order given, with a "__metadata__" object of strings.

struct NamedTensor {
  std::string name;
  const Tensor* tensor;  // host tensor of F32, BF16 or F16
};

// The file's bytes.
std::string EncodeSafetensors(absl::Span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata);

// Writes atomically (a temporary file renamed over path).
absl::Status WriteSafetensors(const std::string& path, absl::Span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata);

struct SafetensorsFile {
  std::vector<std::string> names;  // in the header's order
  std::vector<Tensor> tensors;     // same order, the dtype as stored
  std::map<std::string, std::string> metadata;
};

// Reads strictly: any malformed header, unknown dtype, size that disagrees with the shape,
// gap or overlap between ranges, or bytes after the last range is an error naming the file
// and the tensor.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);
// The same for bytes already read; `where` names them in errors (a path).
absl::StatusOr<SafetensorsFile> DecodeSafetensors(absl::string_view bytes,
                                                  absl::string_view where);

}  // namespace cohort

#endif  // COHORT_TRAINER_IO_SAFETENSORS_H_
