#include "services/shard/shard_service.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_util.h"
#include "services/common/optimizer_config.h"
#include "services/common/part_codec.h"

namespace cohort {
namespace {

// Answers on one worker's PushPull stream. gRPC allows one write at a time per stream, and
// updates complete on whichever thread brought the last push, so writes are serialised.
class StreamSink final : public PartSink {
 public:
  explicit StreamSink(grpc::ServerReaderWriter<v1::Part, v1::Part>* stream) : stream_(stream) {}

  void Send(PartId id, int64_t version, absl::Span<const float> value) override {
    absl::MutexLock lock(&mu_);
    EncodePart(id, version, /*rank=*/-1, value, &message_);
    stream_->Write(message_);  // a broken stream shows up as the reader's end
  }

 private:
  grpc::ServerReaderWriter<v1::Part, v1::Part>* const stream_;
  absl::Mutex mu_;
  v1::Part message_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::Status ShardService::Init(grpc::ServerContext*, grpc::ServerReader<v1::InitMessage>* reader,
                                v1::InitReply*) {
  v1::InitMessage message;
  if (!reader->Read(&message) || !message.has_config()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "shard init: the first message must carry the config");
  }
  const v1::InitMessage::Config& c = message.config();
  ShardConfig config;
  config.num_workers = c.num_workers();
  config.mode = c.mode();
  config.partition_fingerprint = c.partition_fingerprint();
  absl::StatusOr<OptimizerSpec> spec = FromProto(c.optimizer());
  if (!spec.ok()) return ToGrpcStatus(spec.status());
  config.optimizer = *spec;
  if (absl::Status s = core_->Configure(config, c.num_parts()); !s.ok()) return ToGrpcStatus(s);
  std::vector<float> value;
  while (reader->Read(&message)) {
    absl::StatusOr<DecodedPart> part = DecodePart(message.part(), &value);
    if (!part.ok()) return ToGrpcStatus(part.status());
    if (absl::Status s = core_->AddPart(part->id, value); !s.ok()) return ToGrpcStatus(s);
  }
  if (!core_->ready()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "shard init ended before every announced part arrived");
  }
  return grpc::Status::OK;
}

grpc::Status ShardService::PushPull(grpc::ServerContext*,
                                    grpc::ServerReaderWriter<v1::Part, v1::Part>* stream) {
  StreamSink sink(stream);
  v1::Part message;
  std::vector<float> grad;
  absl::Status status;
  while (status.ok() && stream->Read(&message)) {
    absl::StatusOr<DecodedPart> part = DecodePart(message, &grad);
    status = part.status();
    if (status.ok()) status = core_->Push(part->rank, part->id, part->version, grad, &sink);
  }
  core_->Detach(&sink);
  return ToGrpcStatus(status);
}

grpc::Status ShardService::Pull(grpc::ServerContext*, const v1::PullRequest* request,
                                grpc::ServerWriter<v1::Part>* writer) {
  std::vector<float> value;
  v1::Part message;
  for (const v1::PullRequest::PartId& p : request->parts()) {
    const PartId id{p.key(), p.part()};
    absl::StatusOr<int64_t> version = core_->Read(id, &value);
    if (!version.ok()) return ToGrpcStatus(version.status());
    EncodePart(id, *version, /*rank=*/-1, value, &message);
    if (!writer->Write(message)) break;
  }
  return grpc::Status::OK;
}

}  // namespace cohort
