// The settings rank 0 sends a shard (InitMessage.Config, with the optimizer and schedule), as
// the shard validates them, then a part and a push under them.

#include <cstdint>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "proto/shard.pb.h"
#include "services/shard/shard_core.h"
#include "services/wire/config_proto.h"

namespace cohort {

// Takes the answers and drops them.
class PartSinkForFuzzing final : public PartSink {
 public:
  void Send(PartId, int64_t, absl::Span<const float>, PinCount*) override {}
};

}  // namespace cohort

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
  if (!core.Configure(*config).ok() || config->num_parts == 0) return 0;
  // A part sized by the config (a slot per worker), then a push and a roll back's check.
  const std::vector<float> value(4, 1.0f);
  if (!core.AddPart({0, 0}, value).ok()) return 0;
  cohort::PartSinkForFuzzing sink;
  core.Push(0, {0, 0}, 0, value, &sink).IgnoreError();
  return 0;
}
