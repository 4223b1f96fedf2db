#include "services/wire/part_codec.h"

#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(PartCodecTest, ValuesAndHeaderRoundTrip) {
  const std::vector<float> values = {1.5f, -2.25f, 3e-8f, 7.0f};
  v1::Part part;
  EncodePart({12, 3}, 41, 1, values, &part);
  EXPECT_EQ(part.header().bytes(), 16);
  EXPECT_EQ(part.header().dtype(), v1::F32);
  EXPECT_EQ(part.header().generation(), 0);
  std::vector<float> out;
  auto d = DecodePart(part, &out);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->id, (PartId{12, 3}));
  EXPECT_EQ(d->version, 41);
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(out, values);
  // The message is reused: a shorter part replaces the longer one's bytes entirely.
  EncodePart({1, 0}, 0, 0, absl::MakeConstSpan(values).subspan(0, 1), &part);
  ASSERT_TRUE(DecodePart(part, &out).ok());
  EXPECT_EQ(out, std::vector<float>{1.5f});
}

TEST(PartCodecTest, InconsistentHeadersAreRejectedNamingThePart) {
  const std::vector<float> values = {1, 2};
  v1::Part part;
  EncodePart({5, 2}, 0, 0, values, &part);
  std::vector<float> out;
  part.mutable_header()->set_bytes(12);
  EXPECT_EQ(DecodePart(part, &out).status().message(),
            "worker 0's key 5 part 2: header says 12 bytes, the message carries 8 (or not whole floats)");
  EncodePart({5, 2}, 0, 0, values, &part);
  part.mutable_header()->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_FALSE(DecodePart(part, &out).ok());
  EncodePart({5, 2}, 0, 0, values, &part);
  part.mutable_header()->set_generation(-1);
  EXPECT_FALSE(DecodePart(part, &out).ok());
  part.mutable_header()->set_generation(2);  // whether it is the current one is the shard's call
  ASSERT_TRUE(DecodePart(part, &out).ok());
  EXPECT_EQ(DecodePart(part, &out)->generation, 2);
}

std::vector<float> Gathered(const ReceivedPart& part) {
  std::vector<float> out(part.bytes() / sizeof(float));
  CopyChunks(part.chunks(), out.data());
  return out;
}

// A byte string cut into slices of the given sizes (cycled), as the transport delivers it.
grpc::ByteBuffer Sliced(const std::string& bytes, std::vector<size_t> sizes) {
  std::vector<grpc::Slice> slices;
  for (size_t pos = 0, i = 0; pos < bytes.size(); ++i) {
    const size_t n = std::min(sizes[i % sizes.size()], bytes.size() - pos);
    slices.emplace_back(bytes.data() + pos, n);
    pos += n;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// The bulk path's message is a valid v1::Part: protobuf reads what SerializePart wrote, and
// ReceivedPart reads what protobuf wrote, whatever slices the bytes arrive in.
TEST(PartCodecTest, BulkMessagesAreProtobufPartsBothWays) {
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * i - 3.25f;
  const grpc::ByteBuffer sent = SerializePart({9, 4}, 77, 1, values, nullptr, /*generation=*/3);
  v1::Part parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(sent)));
  std::vector<float> decoded;
  ASSERT_TRUE(DecodePart(parsed, &decoded).ok());
  EXPECT_EQ(decoded, values);
  EXPECT_EQ(parsed.header().version(), 77);
  EXPECT_EQ(parsed.header().generation(), 3);

  v1::Part part;
  EncodePart({9, 4}, 77, 1, values, &part);
  for (const std::vector<size_t>& sizes :
       std::vector<std::vector<size_t>>{{1}, {3, 7}, {13, 4096}, {1 << 20}}) {
    grpc::ByteBuffer b = Sliced(part.SerializeAsString(), sizes);
    ReceivedPart r;
    ASSERT_TRUE(r.Parse(&b).ok());
    EXPECT_EQ(r.header().id, (PartId{9, 4}));
    EXPECT_EQ(r.header().version, 77);
    EXPECT_EQ(r.header().rank, 1);
    EXPECT_EQ(Gathered(r), values) << "slices of " << sizes[0];
  }
}

// Fields in another order (valid protobuf, not the usual layout) take the protobuf path.
TEST(PartCodecTest, OtherFieldOrdersAreParsedByProtobuf) {
  const std::vector<float> values = {1, 2, 3};
  v1::Part full;
  EncodePart({2, 0}, 5, 0, values, &full);
  v1::Part data_only, header_only;
  data_only.set_data(full.data());
  *header_only.mutable_header() = full.header();
  grpc::ByteBuffer b = Sliced(data_only.SerializeAsString() + header_only.SerializeAsString(), {5});
  ReceivedPart r;
  ASSERT_TRUE(r.Parse(&b).ok());
  EXPECT_EQ(r.header().id, (PartId{2, 0}));
  EXPECT_EQ(Gathered(r), values);
  grpc::ByteBuffer junk = Sliced("\x0a\xff\xff", {2});
  EXPECT_FALSE(r.Parse(&junk).ok());
}

// Without copying, the message aliases the values and holds the pin until it is destroyed.
TEST(PartCodecTest, ZeroCopyMessagesHoldThePinWhileTheyLive) {
  std::vector<float> values = {4, 5, 6, 7};
  PinCount pin;
  {
    grpc::ByteBuffer b = SerializePart({1, 0}, 0, 0, values, &pin);
    EXPECT_EQ(pin.count(), 1);
    values[2] = 60;  // the message sees the change: it was not copied
    ReceivedPart r;
    ASSERT_TRUE(r.Parse(&b).ok());
    EXPECT_EQ(Gathered(r), (std::vector<float>{4, 5, 60, 7}));
  }
  EXPECT_EQ(pin.count(), 0);
  pin.WaitUnpinned();
}

TEST(PartCodecTest, BulkHeadersAreCheckedLikeDecodePart) {
  v1::Part part;
  EncodePart({5, 2}, 0, 0, std::vector<float>{1, 2}, &part);
  part.mutable_header()->set_bytes(12);
  grpc::ByteBuffer b = Sliced(part.SerializeAsString(), {64});
  ReceivedPart r;
  EXPECT_EQ(r.Parse(&b).message(),
            "worker 0's key 5 part 2: header says 12 bytes, the message carries 8 (or not whole floats)");
}

}  // namespace
}  // namespace cohort
