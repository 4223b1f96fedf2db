#include "trainer/data/recordio.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// The magic's bytes, little-endian.
const std::string kMagic("\x0a\x23\xd7\xce", 4);

// Every record of a .rec file's bytes, in order.
std::vector<std::string> ReadAll(const std::string& file) {
  std::vector<std::string> payloads;
  int64_t offset = 0;
  while (offset < static_cast<int64_t>(file.size())) {
    absl::StatusOr<RecordIORecord> r = ReadRecordIO(Bytes(file), offset, "t.rec");
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    payloads.push_back(r->payload);
    offset = r->next_offset;
  }
  return payloads;
}

TEST(RecordIOTest, FramingIsDmlcsAndRoundTrips) {
  // One byte: magic, cflag 0 and length 1, the byte, three bytes of padding.
  EXPECT_EQ(EncodeRecordIO("x"), kMagic + std::string("\x01\x00\x00\x00", 4) + "x" +
                                     std::string(3, '\0'));
  const std::vector<std::string> payloads = {"", "abc", "abcd", std::string(1000, 'z'),
                                             std::string("\0\xff\x10", 3)};
  std::string file;
  for (const std::string& p : payloads) file += EncodeRecordIO(p);
  EXPECT_EQ(file.size() % 4, 0u);
  EXPECT_EQ(ReadAll(file), payloads);
}

TEST(RecordIOTest, ARecordHoldingTheMagicIsSplitIntoPartsAndJoinedAgain) {
  // The magic at aligned offsets 4 and 12 splits the record in three parts (flags 1, 2, 3);
  // one at an unaligned offset stays inside a part.
  const std::string payload = "head" + kMagic + "mid." + kMagic + "tail" + "x" + kMagic + "yzw";
  const std::string file = EncodeRecordIO(payload);
  EXPECT_EQ(static_cast<uint8_t>(file[7]) >> 5, 1);  // the first part's cflag
  EXPECT_EQ(ReadAll(file + EncodeRecordIO("next")),
            (std::vector<std::string>{payload, "next"}));
  // A payload that is only the magic: two empty parts.
  EXPECT_EQ(ReadAll(EncodeRecordIO(kMagic)), std::vector<std::string>{kMagic});
}

TEST(RecordIOTest, DamageIsNamedWithTheFileAndTheOffset) {
  const std::string good = EncodeRecordIO("abcdefgh");
  std::string bad_magic = good + good;
  bad_magic[good.size()] = 'X';
  absl::StatusOr<RecordIORecord> r = ReadRecordIO(Bytes(bad_magic), good.size(), "a.rec");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "a.rec: the RecordIO record at byte offset 16: bad magic"))
      << r.status();
  const std::string truncated = good.substr(0, good.size() - 5);
  r = ReadRecordIO(Bytes(truncated), 0, "a.rec");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "a truncated file")) << r.status();
  r = ReadRecordIO(Bytes(good.substr(0, 5)), 0, "a.rec");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "inside a part's head")) << r.status();
  // A middle part with no start.
  std::string orphan = good;
  orphan[7] = static_cast<char>(2 << 5);
  r = ReadRecordIO(Bytes(orphan), 0, "a.rec");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "a part with flag 2 starts the record"))
      << r.status();
  // An offset past the end (a wrong index) is an error, not a read out of bounds.
  EXPECT_FALSE(ReadRecordIO(Bytes(good), 1 << 20, "a.rec").ok());
  EXPECT_FALSE(ReadRecordIO(Bytes(good), -4, "a.rec").ok());
}

TEST(ImageRecordTest, Im2recsHeaderWithOneOrSeveralLabels) {
  ImageRecord one{{7.0f}, 42, 0, "\xff\xd8jpeg"};
  const std::string payload = EncodeImageRecord(one);
  EXPECT_EQ(payload.size(), 24u + one.image.size());
  absl::StatusOr<ImageRecord> back = DecodeImageRecord(payload, "r");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->labels, std::vector<float>{7.0f});
  EXPECT_EQ(back->id, 42u);
  EXPECT_EQ(back->image, one.image);
  ImageRecord several{{1.0f, 2.5f, 3.0f}, 9, 3, "img"};
  back = DecodeImageRecord(EncodeImageRecord(several), "r");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->labels, several.labels);
  EXPECT_EQ(back->id2, 3u);
  EXPECT_EQ(back->image, "img");
  // Short records say what is missing.
  EXPECT_TRUE(absl::StrContains(DecodeImageRecord("short", "f.rec").status().message(),
                                "f.rec: an image record of 5 bytes, shorter than its 24-byte "
                                "header"));
  std::string cut = EncodeImageRecord(several).substr(0, 30);
  EXPECT_TRUE(absl::StrContains(DecodeImageRecord(cut, "f.rec").status().message(),
                                "says it has 3 labels, but only 6 bytes follow"));
}

TEST(RecordIOIndexTest, LinesOfIdAndOffsetInsideTheFile) {
  auto index = ParseRecordIOIndex("0\t0\n1\t16\n\n2 32\n", 48, "t.idx");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, (std::vector<std::pair<uint64_t, int64_t>>{{0, 0}, {1, 16}, {2, 32}}));
  index = ParseRecordIOIndex("0\t0\n1\t4096\n", 48, "t.idx");
  ASSERT_FALSE(index.ok());
  EXPECT_TRUE(absl::StrContains(index.status().message(),
                                "t.idx:2: record 1 at byte offset 4096, past the end of its .rec "
                                "file (48 bytes)"))
      << index.status();
  EXPECT_TRUE(absl::StrContains(ParseRecordIOIndex("0 zero\n", 48, "t.idx").status().message(),
                                "t.idx:1: expected 'id<TAB>offset'"));
}

}  // namespace
}  // namespace cohort
