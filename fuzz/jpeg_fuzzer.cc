// The JPEG decoder: any bytes, at a scale the first byte picks.

#include <cstdint>

#include "absl/strings/string_view.h"
#include "trainer/data/jpeg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int min_side = data[0];
  cohort::DecodeJpeg(absl::string_view(reinterpret_cast<const char*>(data) + 1, size - 1),
                     min_side, "fuzz input")
      .IgnoreError();
  return 0;
}
