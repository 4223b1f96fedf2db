// The settings rank 0 sends a shard (InitMessage.Config, with the optimizer and schedule), as
// the shard validates them before it takes any part.

#include <cstdint>

#include <google/protobuf/stubs/logging.h>

#include "proto/shard.pb.h"
#include "services/shard/shard_core.h"
#include "services/wire/config_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every string field that is not UTF-8; the parse's result is what counts.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  cohort::v1::InitMessage::Config message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<cohort::ShardConfig> config = cohort::FromProto(message);
  if (!config.ok()) return 0;
  cohort::ShardCore core;
  core.Configure(*config).IgnoreError();
  return 0;
}
