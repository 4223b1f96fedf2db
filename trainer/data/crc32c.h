#ifndef COHORT_TRAINER_DATA_CRC32C_H_
#define COHORT_TRAINER_DATA_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace cohort {

// CRC-32C (Castagnoli), as TFRecord files check their framing. Debian has no C++ library of it
// (zlib's crc32 is the IEEE polynomial; Debian's abseil predates absl/crc).
uint32_t Crc32c(absl::string_view bytes);

// TFRecord's masked form: rotated right by 15 and offset, so that a CRC of bytes holding CRCs
// stays well spread.
inline uint32_t MaskedCrc32c(absl::string_view bytes) {
  const uint32_t crc = Crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_CRC32C_H_
