// What a shard reads from any worker's stream: the bulk path's batch parser, on arbitrary bytes
// cut into one to three slices as the transport may deliver them, each accepted part decoded
// as its header says, and the protobuf path's decoder.

#include <cstdint>

#include <google/protobuf/stubs/logging.h>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "services/wire/byte_chunks.h"
#include "services/wire/part_codec.h"
#include "services/wire/wire_encoding.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every string field that is not UTF-8; the parse's result is what counts.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const int cuts = data[0] % 3;  // the first byte says where the slices end
  ++data;
  --size;
  const size_t first = cuts >= 1 ? size / 3 : size;
  const size_t second = cuts >= 2 ? 2 * size / 3 : size;
  std::vector<grpc::Slice> slices = {grpc::Slice(data, first)};
  if (cuts >= 1) slices.emplace_back(data + first, second - first);
  if (cuts >= 2) slices.emplace_back(data + second, size - second);
  grpc::ByteBuffer message(slices.data(), slices.size());
  cohort::ReceivedBatch batch;
  if (batch.Parse(&message).ok()) {
    for (size_t i = 0; i < batch.size(); ++i) {
      const cohort::PartHeader& h = batch.header(i);
      // An accepted part's chunks hold whole values of its encoding; decoding the elements
      // they hold reads exactly them.
      const size_t bytes = cohort::TotalBytes(batch.chunks(i));
      size_t elements = 0;
      switch (h.encoding) {
        case cohort::WireEncoding::kF32: elements = bytes / 4; break;
        case cohort::WireEncoding::kF16:
        case cohort::WireEncoding::kBF16: elements = bytes / 2; break;
        case cohort::WireEncoding::kTwoBit: elements = bytes * 4; break;
      }
      if (cohort::EncodedBytes(h.encoding, elements) != bytes) __builtin_trap();
      std::vector<float> values(elements);
      cohort::DecodeValues(h.encoding, batch.chunks(i), h.threshold, absl::MakeSpan(values))
          .IgnoreError();
    }
  }
  cohort::v1::Part decoded;
  if (decoded.ParseFromArray(data, static_cast<int>(size))) {
    std::vector<float> values;
    cohort::DecodePart(decoded, &values).IgnoreError();
  }
  return 0;
}
