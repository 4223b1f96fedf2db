#include "services/wire/wire_encoding.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "trainer/tensor/tensor.h"

namespace cohort {
namespace {

constexpr char kTwoBitPrefix[] = "2bit:";

// The x86 instructions that convert eight floats to and from F16 at once (F16C), where the CPU
// has them; FloatToF16/F16ToFloat are the reference they are tested against.
bool HasF16c() {
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    // AVX's check includes the OS saving its registers; F16C is a CPUID bit of its own.
    return __builtin_cpu_supports("avx") && (ecx & bit_F16C) != 0;
  }();
  return has;
}

__attribute__((target("avx,f16c"))) void FloatsToF16Fast(const float* in, size_t n,
                                                          uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToF16(in[i]);
}

__attribute__((target("avx,f16c"))) void F16ToFloatsFast(const uint16_t* in, size_t n,
                                                          float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = F16ToFloat(in[i]);
}

void FloatsToF16(const float* in, size_t n, uint16_t* out) {
  if (HasF16c()) return FloatsToF16Fast(in, n, out);
  for (size_t i = 0; i < n; ++i) out[i] = FloatToF16(in[i]);
}

void F16ToFloats(const uint16_t* in, size_t n, float* out) {
  if (HasF16c()) return F16ToFloatsFast(in, n, out);
  for (size_t i = 0; i < n; ++i) out[i] = F16ToFloat(in[i]);
}

// FloatToBf16's rounding without its branch, so that the loop vectorises.
void FloatsToBf16(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, in + i, sizeof x);
    const uint16_t rounded = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    const uint16_t quiet_nan = static_cast<uint16_t>((x >> 16) | 0x40u);
    out[i] = (x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  }
}

void Bf16ToFloats(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t x = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &x, sizeof x);
  }
}

void EncodeTwoBit(absl::Span<const float> values, float threshold, float* residual,
                  unsigned char* out) {
  std::memset(out, 0, EncodedBytes(WireEncoding::kTwoBit, values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    float r = residual[i] + values[i];
    unsigned code = 0;
    if (r >= threshold) {
      code = 1;
      r -= threshold;
    } else if (r <= -threshold) {
      code = 2;
      r += threshold;
    }
    residual[i] = r;
    out[i / 4] |= static_cast<unsigned char>(code << (2 * (i % 4)));
  }
}

// Calls fn(first_byte, bytes) over chunks' bytes gathered into blocks of `block` bytes (the
// last may be shorter): a value may straddle two chunks, never two blocks.
template <typename Fn>
void ForEachByteBlock(ByteChunks chunks, absl::Span<char> block, Fn fn) {
  size_t filled = 0, first = 0;
  for (absl::Span<const char> c : chunks) {
    while (!c.empty()) {
      const size_t n = std::min(c.size(), block.size() - filled);
      std::memcpy(block.data() + filled, c.data(), n);
      filled += n;
      c.remove_prefix(n);
      if (filled == block.size()) {
        fn(first, absl::Span<const char>(block.data(), filled));
        first += filled;
        filled = 0;
      }
    }
  }
  if (filled > 0) fn(first, absl::Span<const char>(block.data(), filled));
}

}  // namespace

absl::string_view WireEncodingName(WireEncoding encoding) {
  switch (encoding) {
    case WireEncoding::kF32: return "F32";
    case WireEncoding::kF16: return "F16";
    case WireEncoding::kBF16: return "BF16";
    case WireEncoding::kTwoBit: return "TWO_BIT";
  }
  return "?";
}

absl::StatusOr<GradientCompression> ParseGradientCompression(absl::string_view text) {
  GradientCompression c;
  if (text == "none" || text.empty()) return c;
  if (text == "fp16") {
    c.encoding = WireEncoding::kF16;
    return c;
  }
  if (text == "bf16") {
    c.encoding = WireEncoding::kBF16;
    return c;
  }
  if (text == "2bit" || absl::StartsWith(text, kTwoBitPrefix)) {
    c.encoding = WireEncoding::kTwoBit;
    if (text == "2bit") return c;
    if (absl::SimpleAtof(text.substr(sizeof(kTwoBitPrefix) - 1), &c.threshold) &&
        c.threshold > 0 && c.threshold < 1e30f) {
      return c;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--gradient_compression=", text,
      ": expected none, fp16, bf16, 2bit or 2bit:THRESHOLD (a positive number, e.g. 2bit:0.5)"));
}

std::string GradientCompressionName(const GradientCompression& c) {
  switch (c.encoding) {
    case WireEncoding::kF32: return "none";
    case WireEncoding::kF16: return "fp16";
    case WireEncoding::kBF16: return "bf16";
    case WireEncoding::kTwoBit: return absl::StrCat("2bit:", c.threshold);
  }
  return "?";
}

size_t EncodedBytes(WireEncoding encoding, size_t elements) {
  switch (encoding) {
    case WireEncoding::kF32: return elements * 4;
    case WireEncoding::kF16:
    case WireEncoding::kBF16: return elements * 2;
    case WireEncoding::kTwoBit: return (elements + 3) / 4;
  }
  return 0;
}

void EncodeValues(WireEncoding encoding, absl::Span<const float> values, float threshold,
                  float* residual, char* out) {
  switch (encoding) {
    case WireEncoding::kF32:
      if (!values.empty()) std::memcpy(out, values.data(), values.size() * sizeof(float));
      return;
    case WireEncoding::kF16:
      FloatsToF16(values.data(), values.size(), reinterpret_cast<uint16_t*>(out));
      return;
    case WireEncoding::kBF16:
      FloatsToBf16(values.data(), values.size(), reinterpret_cast<uint16_t*>(out));
      return;
    case WireEncoding::kTwoBit:
      EncodeTwoBit(values, threshold, residual, reinterpret_cast<unsigned char*>(out));
      return;
  }
}

absl::Status DecodeValues(WireEncoding encoding, ByteChunks chunks, float threshold,
                          absl::Span<float> out) {
  const size_t bytes = TotalBytes(chunks);
  if (bytes != EncodedBytes(encoding, out.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        bytes, " bytes of ", WireEncodingName(encoding), " values, not the ",
        EncodedBytes(encoding, out.size()), " that ", out.size(), " values take"));
  }
  if (encoding == WireEncoding::kF32) {
    CopyChunks(chunks, out.data());
    return absl::OkStatus();
  }
  // 16 KiB blocks: a whole number of every encoding's units, small enough to stay in cache.
  alignas(64) thread_local char block[16 << 10];
  bool valid = true;
  ForEachByteBlock(chunks, absl::MakeSpan(block), [&](size_t first, absl::Span<const char> b) {
    const auto* halves = reinterpret_cast<const uint16_t*>(b.data());
    switch (encoding) {
      case WireEncoding::kF16:
        F16ToFloats(halves, b.size() / 2, out.data() + first / 2);
        break;
      case WireEncoding::kBF16:
        Bf16ToFloats(halves, b.size() / 2, out.data() + first / 2);
        break;
      case WireEncoding::kTwoBit: {
        const float levels[4] = {0.0f, threshold, -threshold, 0.0f};
        const size_t start = first * 4;
        const size_t end = std::min(out.size(), start + b.size() * 4);
        for (size_t i = start; i < end; ++i) {
          const unsigned code =
              (static_cast<unsigned char>(b[(i - start) / 4]) >> (2 * (i % 4))) & 3u;
          valid &= code != 3;
          out[i] = levels[code];
        }
        break;
      }
      case WireEncoding::kF32:
        break;
    }
  });
  if (!valid) {
    return absl::InvalidArgumentError("a 2-bit code of 3, which stands for no value");
  }
  return absl::OkStatus();
}

}  // namespace cohort
