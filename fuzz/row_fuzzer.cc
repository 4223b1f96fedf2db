// What a shard reads of a worker's table rows: arbitrary bytes parsed as a v1::TableRows and
// decoded; an accepted message's rows are ascending and each row has its dim values.

#include <cstdint>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "services/wire/row_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  cohort::v1::TableRows message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  std::vector<uint64_t> ids;
  std::vector<float> values;
  absl::StatusOr<cohort::TableRowsHeader> header = cohort::DecodeRows(message, &ids, &values);
  if (!header.ok()) return 0;
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i - 1] >= ids[i]) __builtin_trap();
  }
  if (values.size() != ids.size() * static_cast<size_t>(header->dim)) __builtin_trap();
  return 0;
}
