#include "services/common/part_codec.h"

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
            "key 5 part 2: header says 12 bytes, the message carries 8 (or not whole floats)");
  EncodePart({5, 2}, 0, 0, values, &part);
  part.mutable_header()->set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_FALSE(DecodePart(part, &out).ok());
  EncodePart({5, 2}, 0, 0, values, &part);
  part.mutable_header()->set_generation(2);
  EXPECT_FALSE(DecodePart(part, &out).ok());
}

}  // namespace
}  // namespace cohort
