#include "trainer/data/tfrecord.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "trainer/data/crc32c.h"

namespace cohort {
namespace {

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(Crc32cTest, TheCastagnoliCheckValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);  // the catalogue's check value
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau);  // RFC 3720, B.4
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62a8ab43u);
}

TEST(TFRecordTest, FramingRoundTripsRecordAfterRecord) {
  const std::string file = EncodeTFRecord("first") + EncodeTFRecord("") + EncodeTFRecord("third");
  EXPECT_EQ(EncodeTFRecord("first").size(), 8u + 4 + 5 + 4);
  std::vector<std::string> read;
  int64_t offset = 0;
  while (offset < static_cast<int64_t>(file.size())) {
    absl::StatusOr<TFRecord> r = ReadTFRecord(Bytes(file), offset, "t.tfrecord");
    ASSERT_TRUE(r.ok()) << r.status();
    read.push_back(r->payload);
    offset = r->next_offset;
  }
  EXPECT_EQ(read, (std::vector<std::string>{"first", "", "third"}));
}

TEST(TFRecordTest, EachDamageIsNamedWithTheFileAndTheOffset) {
  const std::string good = EncodeTFRecord("payload");
  const std::string two = good + good;
  std::string bad_length = two;
  bad_length[good.size()] ^= 1;
  absl::StatusOr<TFRecord> r = ReadTFRecord(Bytes(bad_length), good.size(), "a.tfrecord");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "a.tfrecord: the TFRecord at byte offset 23: the CRC of its length "
                                "does not match"))
      << r.status();
  std::string bad_data = good;
  bad_data[14] ^= 0x40;
  r = ReadTFRecord(Bytes(bad_data), 0, "a.tfrecord");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "the CRC of its bytes does not match"))
      << r.status();
  r = ReadTFRecord(Bytes(good.substr(0, good.size() - 2)), 0, "a.tfrecord");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "a truncated file")) << r.status();
  r = ReadTFRecord(Bytes(good.substr(0, 7)), 0, "a.tfrecord");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "inside its 12-byte head")) << r.status();
  EXPECT_FALSE(ReadTFRecord(Bytes(good), 1 << 20, "a.tfrecord").ok());
}

TEST(ImageExampleTest, TheImageAndItsLabelAsTheFileCountsThem) {
  const std::string payload = EncodeImageExample("\xff\xd8jpeg", 17);
  absl::StatusOr<ImageExample> e = DecodeImageExample(payload, 1, "t");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->image, "\xff\xd8jpeg");
  EXPECT_EQ(e->label, 16);  // TF's ImageNet files count from 1
  e = DecodeImageExample(payload, 0, "t");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->label, 17);
  e = DecodeImageExample(EncodeImageExample("img", 0), 1, "f.tfrecord");
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(absl::StrContains(e.status().message(), "label 0 read as -1, below 0"))
      << e.status();
  e = DecodeImageExample(std::string("\xff\xff\xff", 3), 0, "f.tfrecord");
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(absl::StrContains(e.status().message(), "not a tf.train.Example")) << e.status();
  e = DecodeImageExample("", 0, "f.tfrecord");
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(absl::StrContains(e.status().message(), "without one 'image/encoded'"))
      << e.status();
}

TEST(ImageExampleTest, ReadsTheBytesTensorFlowWrites) {
  // An Example built by hand from TF's field numbers (feature map entries of a BytesList
  // "image/encoded" and a packed Int64List "image/class/label" = 17), as TF serialises it.
  const std::string tf_bytes(
      "\x0a\x3b\x0a\x1d\x0a\x0d" "image/encoded" "\x12\x0c\x0a\x0a\x0a\x08\xff\xd8\xff\xe0"
      "jpeg" "\x0a\x1a\x0a\x11" "image/class/label" "\x12\x05\x1a\x03\x0a\x01\x11",
      61);
  absl::StatusOr<ImageExample> e = DecodeImageExample(tf_bytes, 1, "t");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->image, "\xff\xd8\xff\xe0jpeg");
  EXPECT_EQ(e->label, 16);
}

}  // namespace
}  // namespace cohort
