// The safetensors reader (model files, and every shard checkpoint) and the shard checkpoint's
// decoder on top of it.

#include <cstdint>

#include "absl/strings/string_view.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "trainer/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  cohort::DecodeSafetensors(bytes, "fuzz input").IgnoreError();
  cohort::DecodeShardCheckpoint(bytes, "fuzz input").IgnoreError();
  return 0;
}
