#include "services/wire/part_codec.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/tensor/tensor.h"

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
            "worker 0's key 5 part 2: header says 12 bytes, the message carries 8 (or not whole "
            "values)");
  EncodePart({5, 2}, 0, 0, values, &part);
  part.mutable_header()->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_FALSE(DecodePart(part, &out).ok());
  EncodePart({5, 2}, 0, 0, values, &part);
  part.mutable_header()->set_generation(-1);
  EXPECT_FALSE(DecodePart(part, &out).ok());
  part.mutable_header()->set_generation(2);  // whether it is the current one is the shard's call
  ASSERT_TRUE(DecodePart(part, &out).ok());
  EXPECT_EQ(DecodePart(part, &out)->generation, 2);
  for (float lr : {-1.0f, std::numeric_limits<float>::quiet_NaN(),
                   std::numeric_limits<float>::infinity()}) {
    part.mutable_header()->set_lr(lr);
    EXPECT_EQ(DecodePart(part, &out).status().message(),
              absl::StrCat("worker 0's key 5 part 2: learning rate ", lr))
        << lr;
  }
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

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i % 97) - 48.0f);
  return v;
}

// Part i of a received batch, decoded.
std::vector<float> Values(const ReceivedBatch& batch, size_t i, size_t elements) {
  std::vector<float> out(elements);
  EXPECT_TRUE(DecodeValues(batch.header(i).encoding, batch.chunks(i), batch.header(i).threshold,
                           absl::MakeSpan(out))
                  .ok());
  return out;
}

// A fused message: parts in every encoding, one large enough to travel aliased, read back by
// protobuf and by ReceivedBatch (whatever slices the bytes arrive in) with every header field
// and value as sent.
TEST(PartCodecTest, FusedPartsRoundTripInEveryEncoding) {
  const std::vector<float> small = Ramp(1000, 0.5f);
  const std::vector<float> large = Ramp(kAliasBytes / sizeof(float) + 3, 0.25f);
  std::vector<float> residual(small.size(), 0.0f);
  PinCount pin;
  const WireEncoding encodings[] = {WireEncoding::kF32, WireEncoding::kF16, WireEncoding::kBF16,
                                    WireEncoding::kTwoBit, WireEncoding::kF32};
  std::vector<OutgoingPart> parts;
  for (int i = 0; i < 5; ++i) {
    const bool two_bit = encodings[i] == WireEncoding::kTwoBit;
    parts.push_back({PartHeader{{10 + i, i}, 40 + i, 1, 3, encodings[i], two_bit ? 8.0f : 0.0f,
                                i == 0 ? -1.0f : 0.25f * i},
                     i == 4 ? absl::MakeConstSpan(large) : absl::MakeConstSpan(small), &pin,
                     two_bit ? residual.data() : nullptr});
    pin.Pin();  // as the write queue does
  }
  const grpc::ByteBuffer sent = SerializeBatch(parts);
  EXPECT_EQ(pin.count(), 1);  // the aliased part's, until the message is gone

  v1::PartBatch parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(sent)));
  ASSERT_EQ(parsed.parts_size(), 5);
  EXPECT_EQ(parsed.parts(1).header().dtype(), v1::F16);
  EXPECT_EQ(parsed.parts(3).header().threshold(), 8.0f);
  EXPECT_EQ(parsed.parts(4).data().size(), large.size() * sizeof(float));

  for (const std::vector<size_t>& sizes :
       std::vector<std::vector<size_t>>{{1}, {3, 7}, {13, 4096}, {1 << 20}}) {
    grpc::ByteBuffer b = Sliced(Flatten(sent), sizes);
    ReceivedBatch r;
    ASSERT_TRUE(r.Parse(&b).ok()) << "slices of " << sizes[0];
    ASSERT_EQ(r.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(r.header(i).id, (PartId{static_cast<int64_t>(10 + i), static_cast<int>(i)}));
      EXPECT_EQ(r.header(i).version, static_cast<int64_t>(40 + i));
      EXPECT_EQ(r.header(i).rank, 1);
      EXPECT_EQ(r.header(i).generation, 3);
      EXPECT_EQ(r.header(i).encoding, encodings[i]);
      EXPECT_EQ(r.header(i).lr, i == 0 ? -1.0f : 0.25f * i);  // unset: the schedule's
    }
    EXPECT_EQ(Values(r, 0, small.size()), small);
    EXPECT_EQ(Values(r, 4, large.size()), large);
    const std::vector<float> f16 = Values(r, 1, small.size());
    const std::vector<float> bf16 = Values(r, 2, small.size());
    const std::vector<float> two_bit = Values(r, 3, small.size());
    for (size_t i = 0; i < small.size(); ++i) {
      ASSERT_EQ(f16[i], F16ToFloat(FloatToF16(small[i]))) << i;
      ASSERT_EQ(bf16[i], Bf16ToFloat(FloatToBf16(small[i]))) << i;
      // |v| <= 24 against a threshold of 8: sent as +-8 or 0, the rest kept.
      ASSERT_EQ(two_bit[i] + residual[i], small[i]) << i;
    }
  }
  { grpc::ByteBuffer gone = sent; }
}

// Protobuf's own encoding of a batch, fields in another order than SerializeBatch's, is read
// the same; what is not a PartBatch is refused.
TEST(PartCodecTest, ProtobufBatchesAreReadWhateverTheFieldOrder) {
  const std::vector<float> values = {1, 2, 3};
  v1::Part full;
  EncodePart({2, 0}, 5, 0, values, &full);
  v1::Part data_only, header_only;
  data_only.set_data(full.data());
  *header_only.mutable_header() = full.header();
  const std::string part = data_only.SerializeAsString() + header_only.SerializeAsString();
  v1::PartBatch batch;
  *batch.add_parts() = full;
  // A PartBatch's part field (1, length-delimited) holding the data-first part.
  const std::string message =
      batch.SerializeAsString() + "\x0a" + static_cast<char>(part.size()) + part;
  grpc::ByteBuffer b = Sliced(message, {5});
  ReceivedBatch r;
  ASSERT_TRUE(r.Parse(&b).ok());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.header(1).id, (PartId{2, 0}));
  EXPECT_EQ(Values(r, 0, 3), values);
  EXPECT_EQ(Values(r, 1, 3), values);
  for (const std::string junk : {std::string("\x0a\xff\xff"), std::string("\x12\x01x"),
                                 std::string("\x0a\x02\x1a\x00")}) {
    grpc::ByteBuffer j = Sliced(junk, {2});
    EXPECT_FALSE(r.Parse(&j).ok()) << junk.size();
  }
}

// Small parts are copied into the message (their pin is released at once); a large F32 part is
// aliased and holds its pin until the message is destroyed.
TEST(PartCodecTest, OnlyLargeF32PartsTravelWithoutCopying) {
  std::vector<float> small = {4, 5, 6, 7};
  std::vector<float> large(kAliasBytes / sizeof(float), 1.0f);
  PinCount small_pin, large_pin;
  small_pin.Pin();
  large_pin.Pin();
  {
    const OutgoingPart parts[] = {{PartHeader{{1, 0}}, small, &small_pin},
                                  {PartHeader{{2, 0}}, large, &large_pin}};
    grpc::ByteBuffer b = SerializeBatch(parts);
    EXPECT_EQ(small_pin.count(), 0);
    EXPECT_EQ(large_pin.count(), 1);
    small[2] = 60;  // copied: the message does not see it
    large[2] = 60;  // aliased: it does
    ReceivedBatch r;
    ASSERT_TRUE(r.Parse(&b).ok());
    EXPECT_EQ(Values(r, 0, 4), (std::vector<float>{4, 5, 6, 7}));
    EXPECT_EQ(Values(r, 1, large.size())[2], 60);
  }
  EXPECT_EQ(large_pin.count(), 0);
}

TEST(PartCodecTest, BulkHeadersAreCheckedLikeDecodePart) {
  v1::PartBatch batch;
  EncodePart({5, 2}, 0, 0, std::vector<float>{1, 2}, batch.add_parts());
  batch.mutable_parts(0)->mutable_header()->set_bytes(12);
  grpc::ByteBuffer b = Sliced(batch.SerializeAsString(), {64});
  ReceivedBatch r;
  EXPECT_EQ(r.Parse(&b).message(),
            "worker 0's key 5 part 2: header says 12 bytes, the message carries 8 (or not whole "
            "values)");
  batch.mutable_parts(0)->mutable_header()->set_bytes(8);
  batch.mutable_parts(0)->mutable_header()->set_dtype(v1::TWO_BIT);  // without a threshold
  b = Sliced(batch.SerializeAsString(), {64});
  EXPECT_EQ(r.Parse(&b).message(), "worker 0's key 5 part 2: 2-bit values with threshold 0");
}

// The ring's form of a batch: the same bytes as the gRPC message, F32 values referenced where
// they lie, and read back in place from chunks cut anywhere.
TEST(PartCodecTest, LaidOutBatchIsTheSameMessageReadInPlace) {
  const std::vector<float> small = Ramp(1000, 0.5f);
  const std::vector<float> large = Ramp(kAliasBytes / sizeof(float) + 3, 0.25f);
  const WireEncoding encodings[] = {WireEncoding::kF32, WireEncoding::kF16, WireEncoding::kBF16,
                                    WireEncoding::kTwoBit, WireEncoding::kF32};
  // 2-bit encoding updates its residual: each serialisation starts from its own zeros.
  std::vector<float> residual_a(small.size(), 0.0f), residual_b(small.size(), 0.0f);
  auto parts = [&](std::vector<float>* residual) {
    std::vector<OutgoingPart> out;
    for (int i = 0; i < 5; ++i) {
      const bool two_bit = encodings[i] == WireEncoding::kTwoBit;
      out.push_back({PartHeader{{10 + i, i}, 40 + i, 1, 3, encodings[i], two_bit ? 8.0f : 0.0f},
                     i == 4 ? absl::MakeConstSpan(large) : absl::MakeConstSpan(small), nullptr,
                     two_bit ? residual->data() : nullptr});
    }
    return out;
  };
  const std::string via_grpc = Flatten(SerializeBatch(parts(&residual_a)));
  std::string scratch;
  std::vector<absl::Span<const char>> pieces;
  LayOutBatch(parts(&residual_b), &scratch, &pieces);
  std::string laid_out;
  for (absl::Span<const char> p : pieces) laid_out.append(p.data(), p.size());
  EXPECT_EQ(laid_out, via_grpc);
  EXPECT_EQ(residual_a, residual_b);
  EXPECT_LT(scratch.size(), 3 * small.size() * sizeof(float));  // F32 values were not copied

  for (size_t cut : {size_t{1}, size_t{7}, size_t{4096}, laid_out.size()}) {
    std::vector<absl::Span<const char>> chunks;
    for (size_t pos = 0; pos < laid_out.size(); pos += cut) {
      chunks.emplace_back(laid_out.data() + pos, std::min(cut, laid_out.size() - pos));
    }
    ReceivedBatch r;
    ASSERT_TRUE(r.Parse(ByteChunks(chunks)).ok()) << "chunks of " << cut;
    ASSERT_EQ(r.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(r.header(i).id, (PartId{static_cast<int64_t>(10 + i), static_cast<int>(i)}));
      EXPECT_EQ(r.header(i).encoding, encodings[i]);
    }
    EXPECT_EQ(Values(r, 0, small.size()), small);
    EXPECT_EQ(Values(r, 4, large.size()), large);
  }
  const std::string garbage = "\x0a\x05\x01";
  const absl::Span<const char> one(garbage.data(), garbage.size());
  ReceivedBatch r;
  EXPECT_FALSE(r.Parse(ByteChunks(&one, 1)).ok());
}

}  // namespace
}  // namespace cohort
