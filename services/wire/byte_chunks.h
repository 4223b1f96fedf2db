#ifndef COHORT_SERVICES_WIRE_BYTE_CHUNKS_H_
#define COHORT_SERVICES_WIRE_BYTE_CHUNKS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/types/span.h"

namespace cohort {

// A value received in pieces (the transport's slices, cut at arbitrary byte offsets, so a float
// may straddle two chunks), read in place instead of being gathered first.
using ByteChunks = absl::Span<const absl::Span<const char>>;

inline size_t TotalBytes(ByteChunks chunks) {
  size_t n = 0;
  for (absl::Span<const char> c : chunks) n += c.size();
  return n;
}

// dst: TotalBytes(chunks) bytes.
inline void CopyChunks(ByteChunks chunks, void* dst) {
  char* out = static_cast<char*>(dst);
  for (absl::Span<const char> c : chunks) {
    std::memcpy(out, c.data(), c.size());
    out += c.size();
  }
}

// Reads chunks as consecutive F32 values, one block at a time: each block is gathered into
// `block` (aligned, small enough to stay in cache, whatever the chunks' alignment and however a
// float straddles them), then fn(first_element, values) runs on it; the last block may be
// shorter. TotalBytes(chunks) must be a multiple of 4.
template <typename Fn>
void ForEachFloatBlock(ByteChunks chunks, absl::Span<float> block, Fn fn) {
  char* buffer = reinterpret_cast<char*>(block.data());
  const size_t capacity = block.size() * sizeof(float);
  size_t filled = 0, first = 0;
  for (absl::Span<const char> c : chunks) {
    while (!c.empty()) {
      const size_t n = std::min(c.size(), capacity - filled);
      std::memcpy(buffer + filled, c.data(), n);
      filled += n;
      c.remove_prefix(n);
      if (filled == capacity) {
        fn(first, absl::Span<const float>(block));
        first += block.size();
        filled = 0;
      }
    }
  }
  if (filled > 0) fn(first, absl::Span<const float>(block.data(), filled / sizeof(float)));
}

// Whether every F32 value of chunks is finite (neither NaN nor infinite): one pass over the
// bytes where they lie (a float straddling two chunks is put together), testing the exponent's
// bits so that the loop vectorises. TotalBytes(chunks) must be a multiple of 4.
inline bool AllFinite(ByteChunks chunks) {
  constexpr uint32_t kExponent = 0x7f800000u;  // all ones: an infinity or a NaN
  uint32_t non_finite = 0;
  const auto scan = [&](const char* p, size_t words) {
    for (size_t i = 0; i < words; ++i) {
      uint32_t bits;
      std::memcpy(&bits, p + 4 * i, sizeof bits);
      non_finite |= static_cast<uint32_t>((bits & kExponent) == kExponent);
    }
  };
  char straddling[4];
  size_t carried = 0;  // bytes of a float begun in an earlier chunk
  for (absl::Span<const char> c : chunks) {
    while (carried > 0 && !c.empty()) {
      straddling[carried++] = c.front();
      c.remove_prefix(1);
      if (carried == 4) {
        scan(straddling, 1);
        carried = 0;
      }
    }
    const size_t words = c.size() / 4;
    scan(c.data(), words);
    c.remove_prefix(words * 4);
    for (char byte : c) straddling[carried++] = byte;
  }
  return non_finite == 0;
}

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_BYTE_CHUNKS_H_
