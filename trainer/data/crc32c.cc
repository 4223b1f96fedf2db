#include "trainer/data/crc32c.h"

#include <array>

namespace cohort {

namespace {

// The reflected polynomial 0x1EDC6F41, a byte at a time.
std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (crc & 1 ? 0x82f63b78u : 0);
    table[i] = crc;
  }
  return table;
}

}  // namespace

uint32_t Crc32c(absl::string_view bytes) {
  static const std::array<uint32_t, 256> table = MakeTable();
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : bytes) crc = table[(crc ^ c) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

}  // namespace cohort
