#ifndef COHORT_SERVICES_COMMON_BYTE_CHUNKS_H_
#define COHORT_SERVICES_COMMON_BYTE_CHUNKS_H_

#include <cstddef>
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

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_BYTE_CHUNKS_H_
