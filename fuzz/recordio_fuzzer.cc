// MXNet RecordIO: the input as a .rec file (every record from the start, each decoded as
// im2rec's image record) and as a .idx file.

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/recordio.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Span<const uint8_t> file(data, size);
  int64_t offset = 0;
  while (offset < static_cast<int64_t>(size)) {
    absl::StatusOr<cohort::RecordIORecord> record =
        cohort::ReadRecordIO(file, offset, "fuzz input");
    if (!record.ok()) break;
    cohort::DecodeImageRecord(record->payload, "fuzz input").IgnoreError();
    if (record->next_offset <= offset) __builtin_trap();  // no reader loops forever
    offset = record->next_offset;
  }
  cohort::ParseRecordIOIndex(absl::string_view(reinterpret_cast<const char*>(data), size),
                             static_cast<int64_t>(size), "fuzz input")
      .IgnoreError();
  return 0;
}
