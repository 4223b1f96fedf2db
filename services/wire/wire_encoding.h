#ifndef COHORT_SERVICES_WIRE_WIRE_ENCODING_H_
#define COHORT_SERVICES_WIRE_WIRE_ENCODING_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "services/wire/byte_chunks.h"

namespace cohort {

// How a part's F32 values travel (proto DType): as they are, as 16-bit floats (round to
// nearest even), or, for pushes only, as 2-bit codes of ±threshold with the rounding error kept
// on the worker (MXNet's 2-bit compression).
enum class WireEncoding { kF32, kF16, kBF16, kTwoBit };

absl::string_view WireEncodingName(WireEncoding encoding);

// --gradient_compression: none | fp16 | bf16 | 2bit | 2bit:THRESHOLD.
struct GradientCompression {
  WireEncoding encoding = WireEncoding::kF32;
  float threshold = 0.5f;  // 2bit: the magnitude each non-zero code stands for (MXNet's default)
};
absl::StatusOr<GradientCompression> ParseGradientCompression(absl::string_view text);
std::string GradientCompressionName(const GradientCompression& compression);

// The encoding of the shard's answers to pushes in `push`: 16-bit values for 16-bit gradients;
// F32 for F32 and 2-bit (values have no error feedback to absorb 2-bit's loss).
inline WireEncoding AnswerEncoding(WireEncoding push) {
  return push == WireEncoding::kTwoBit ? WireEncoding::kF32 : push;
}

// Bytes `elements` values take on the wire.
size_t EncodedBytes(WireEncoding encoding, size_t elements);

// Writes values in encoding to out (EncodedBytes(encoding, values.size()) bytes). kTwoBit:
// residual (values.size()) gains the values, each element's code is +threshold when its
// residual reached it, -threshold when it reached -threshold, else 0, and the code's value
// leaves the residual; other encodings leave residual alone (it may be null).
void EncodeValues(WireEncoding encoding, absl::Span<const float> values, float threshold,
                  float* residual, char* out);

// Reads out.size() values in encoding from chunks (EncodedBytes of them, in pieces cut
// anywhere). InvalidArgument on a 2-bit code that stands for nothing (3).
absl::Status DecodeValues(WireEncoding encoding, ByteChunks chunks, float threshold,
                          absl::Span<float> out);

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_WIRE_ENCODING_H_
