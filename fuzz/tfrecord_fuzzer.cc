// TFRecord: the input as a file of records, each decoded as an image Example.

#include <cstdint>

#include "absl/types/span.h"
#include "trainer/data/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Span<const uint8_t> file(data, size);
  int64_t offset = 0;
  while (offset < static_cast<int64_t>(size)) {
    absl::StatusOr<cohort::TFRecord> record = cohort::ReadTFRecord(file, offset, "fuzz input");
    if (!record.ok()) break;
    cohort::DecodeImageExample(record->payload, 1, "fuzz input").IgnoreError();
    if (record->next_offset <= offset) __builtin_trap();  // no reader loops forever
    offset = record->next_offset;
  }
  return 0;
}
