#include "trainer/data/click_log.h"

#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// A line of `columns` columns: label, integers j+1, categories written as f's hex, some empty.
std::string Line(const std::string& label = "1", int columns = kClickColumns) {
  std::vector<std::string> fields = {label};
  for (int j = 0; j < kClickIntegerFeatures; ++j) fields.push_back(absl::StrCat(j + 1));
  for (int f = 0; f < kClickCategoricalFeatures; ++f)
    fields.push_back(absl::StrCat(absl::Hex(f * 4096 + 10, absl::kZeroPad8)));
  fields.resize(columns);
  return absl::StrJoin(fields, "\t");
}

class ClickLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string WriteGzip(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
    gzclose(f);
    return path;
  }
  // Every record of the file, or the first error.
  absl::StatusOr<std::vector<ClickRecord>> ReadAll(const std::string& path,
                                                   ClickLogOptions options = {}) {
    absl::StatusOr<std::unique_ptr<ClickLogReader>> reader = ClickLogReader::Open(path, options);
    if (!reader.ok()) return reader.status();
    std::vector<ClickRecord> records;
    ClickRecord r;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(&r);
      if (!more.ok()) return more.status();
      if (!*more) break;
      records.push_back(r);
    }
    skipped_ = (*reader)->skipped();
    lines_ = (*reader)->lines();
    return records;
  }

  std::filesystem::path dir_;
  int64_t skipped_ = 0;
  int64_t lines_ = 0;
};

TEST_F(ClickLogTest, ParsesEveryColumnAndKnowsWhatIsMissing) {
  ClickRecord r;
  ASSERT_TRUE(ParseClickLine(Line("1"), &r).ok());
  EXPECT_EQ(r.label, 1);
  EXPECT_EQ(r.integers[0], 1);
  EXPECT_EQ(r.integers[12], 13);
  EXPECT_EQ(r.categories[0], 10u);
  EXPECT_EQ(r.categories[25], 25u * 4096 + 10);
  EXPECT_EQ(r.present, (uint64_t{1} << (kClickIntegerFeatures + kClickCategoricalFeatures)) - 1);

  // Criteo's own first line: I2 negative, missing integers and categories, a '\r' at the end.
  const std::string criteo =
      "0\t1\t-1\t\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2\t68fd1e64\t80e26c9b\tfb936136\t7b4723c4"
      "\t25c83c98\t7e0ccccf\tde7995b8\t1f89b562\ta73ee510\ta8cd5504\tb2cb9c98\t37c9c164"
      "\t2824a5f6\t1adce6ef\t8ba8b39a\t891b62e7\te5ba7672\tf54016b9\t21ddcdc9\tb1252a9d"
      "\t07b5194c\t\t3a171ecb\tc5c50484\te8b83407\t9727dd16\r";
  ASSERT_TRUE(ParseClickLine(criteo, &r).ok());
  EXPECT_EQ(r.label, 0);
  EXPECT_EQ(r.integers[1], -1);
  EXPECT_FALSE(r.has_integer(2));
  EXPECT_EQ(r.integers[2], 0);
  EXPECT_TRUE(r.has_integer(3));
  EXPECT_FALSE(r.has_integer(11));
  EXPECT_EQ(r.categories[0], 0x68fd1e64u);
  EXPECT_FALSE(r.has_category(21));
  EXPECT_EQ(r.categories[21], 0u);
  EXPECT_EQ(r.categories[25], 0x9727dd16u);
  EXPECT_TRUE(r.has_category(25));
}

TEST_F(ClickLogTest, AFormattedRecordParsesBackToTheSameRecord) {
  ClickRecord r;
  r.label = 1;
  r.integers[0] = -3;
  r.integers[5] = int64_t{1} << 40;
  r.categories[0] = 0xdeadbeef;
  r.categories[25] = 7;
  r.present = 1 | (1 << 5) | (uint64_t{1} << kClickIntegerFeatures) |
              (uint64_t{1} << (kClickIntegerFeatures + 25));
  const std::string line = FormatClickLine(r);
  EXPECT_EQ(line, "1\t-3\t\t\t\t\t1099511627776\t\t\t\t\t\t\t\tdeadbeef" + std::string(24, '\t') +
                      "\t00000007");
  ClickRecord back;
  ASSERT_TRUE(ParseClickLine(line, &back).ok());
  EXPECT_EQ(back.label, r.label);
  EXPECT_EQ(back.integers, r.integers);
  EXPECT_EQ(back.categories, r.categories);
  EXPECT_EQ(back.present, r.present);
  EXPECT_EQ(FormatClickLine(back), line);
}

TEST_F(ClickLogTest, RefusesEachKindOfMalformedLineNamingTheColumn) {
  ClickRecord r;
  const auto message = [&](const std::string& line) {
    return std::string(ParseClickLine(line, &r).message());
  };
  EXPECT_EQ(message(Line("2")), "the label is '2'; it must be 0 or 1");
  EXPECT_EQ(message(Line("")), "the label is ''; it must be 0 or 1");
  EXPECT_EQ(message(Line("1", 39)),
            "39 tab-separated columns; a click-log line has 40 (label, 13 integers, 26 "
            "categories)");
  EXPECT_EQ(message(""),
            "an empty line; a click-log line has 40 tab-separated columns (label, 13 integers, "
            "26 categories)");
  EXPECT_EQ(message("\r"), message(""));
  EXPECT_EQ(message(Line() + "\tff"),
            "more than 40 tab-separated columns (label, 13 integers, 26 categories)");
  std::string bad = Line();
  bad.replace(bad.find("\t3\t"), 3, "\t3x\t");
  EXPECT_EQ(message(bad), "column I3 holds '3x', not an integer");
  bad = Line();
  bad.replace(bad.find("\t3\t"), 3, "\t99999999999999999999\t");
  EXPECT_EQ(message(bad), "column I3 holds '99999999999999999999', beyond a 64-bit integer");
  bad = Line();
  bad.replace(bad.find("\t3\t"), 3, "\t+3\t");
  EXPECT_EQ(message(bad), "column I3 holds '+3', not an integer");
  bad = Line();
  bad.replace(bad.find("0000100a"), 8, "0000100g");
  EXPECT_EQ(message(bad), "column C2 holds '0000100g', not a hexadecimal value");
  bad = Line();
  bad.replace(bad.find("0000100a"), 8, "10000100a");
  EXPECT_EQ(message(bad),
            "column C2 holds '10000100a', more than 8 hexadecimal digits (a category is a "
            "32-bit value)");
}

TEST_F(ClickLogTest, ReadsPlainAndGzipFilesAlike) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += Line(i % 3 == 0 ? "1" : "0") + "\n";
  absl::StatusOr<std::vector<ClickRecord>> plain = ReadAll(Write("log.txt", text));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->size(), 5000u);  // lines across many 64 KiB chunks
  EXPECT_EQ(lines_, 5000);
  EXPECT_EQ((*plain)[3].label, 1);
  EXPECT_EQ((*plain)[4].label, 0);
  absl::StatusOr<std::vector<ClickRecord>> gzip = ReadAll(WriteGzip("log.gz", text));
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  ASSERT_EQ(gzip->size(), 5000u);
  for (size_t i = 0; i < gzip->size(); ++i) {
    ASSERT_EQ((*gzip)[i].label, (*plain)[i].label) << i;
    ASSERT_EQ((*gzip)[i].categories, (*plain)[i].categories) << i;
  }
  // No newline after the last line; an empty file.
  absl::StatusOr<std::vector<ClickRecord>> unended =
      ReadAll(Write("unended.txt", Line() + "\n" + Line("0")));
  ASSERT_TRUE(unended.ok()) << unended.status();
  EXPECT_EQ(unended->size(), 2u);
  EXPECT_EQ(unended->back().label, 0);
  absl::StatusOr<std::vector<ClickRecord>> empty = ReadAll(Write("empty.txt", ""));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(ClickLogTest, AMalformedLineNamesTheFileAndLineOrIsCountedAndSkipped) {
  const std::string path =
      Write("bad.txt", Line() + "\n" + Line("7") + "\n" + Line("0") + "\n\n" + Line() + "\n");
  absl::StatusOr<std::vector<ClickRecord>> refused = ReadAll(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            absl::StrCat(path,
                         " line 2: the label is '7'; it must be 0 or 1; mend the file, or "
                         "pass --skip_corrupt to count such lines and go on"));
  absl::StatusOr<std::vector<ClickRecord>> skipping = ReadAll(path, {.skip_corrupt = true});
  ASSERT_TRUE(skipping.ok()) << skipping.status();
  EXPECT_EQ(skipping->size(), 3u);
  EXPECT_EQ(skipped_, 2);  // the label, and the empty line
  EXPECT_EQ(lines_, 5);
}

TEST_F(ClickLogTest, ALineLongerThanTheLimitIsRefusedWithoutHoldingIt) {
  const std::string path =
      Write("long.txt", Line() + "\n" + std::string(300000, 'a') + "\n" + Line("0") + "\n");
  absl::StatusOr<std::vector<ClickRecord>> refused = ReadAll(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("line 2: longer than 65536 bytes"), std::string::npos)
      << refused.status();
  absl::StatusOr<std::vector<ClickRecord>> skipping = ReadAll(path, {.skip_corrupt = true});
  ASSERT_TRUE(skipping.ok()) << skipping.status();
  ASSERT_EQ(skipping->size(), 2u);
  EXPECT_EQ(skipping->back().label, 0);  // the line after the long one is whole
}

TEST_F(ClickLogTest, ATruncatedGzipIsDataLossAfterItsLastWholeLine) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += Line(i % 2 ? "1" : "0") + "\n";
  const std::string whole = WriteGzip("whole.gz", text);
  const auto size = std::filesystem::file_size(whole);
  std::filesystem::copy_file(whole, dir_ / "cut.gz");
  std::filesystem::resize_file(dir_ / "cut.gz", size / 2);
  absl::StatusOr<std::vector<ClickRecord>> cut = ReadAll((dir_ / "cut.gz").string());
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("corrupt or truncated gzip data ("), std::string::npos)
      << cut.status();
  EXPECT_NE(cut.status().message().find(") after line "), std::string::npos) << cut.status();
  EXPECT_EQ(ReadAll((dir_ / "nowhere.gz").string()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadAll(dir_.string()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClickFeaturesTest, IdsKeepFeaturesApartAndInputsAreTheReferencesLog) {
  EXPECT_NE(ClickFeatureId(0, 5), ClickFeatureId(1, 5));
  EXPECT_NE(ClickFeatureId(0, 5), ClickFeatureId(0, 6));
  EXPECT_EQ(ClickFeatureId(3, 0x68fd1e64), ClickFeatureId(3, 0x68fd1e64));
  // Spread over the high bits too: a fixed table takes the id modulo its rows.
  int high = 0;
  for (uint32_t v = 0; v < 64; ++v) high += (ClickFeatureId(2, v) >> 63) & 1;
  EXPECT_GT(high, 16);
  EXPECT_LT(high, 48);
  EXPECT_EQ(ClickIntegerInput(0), 0.0f);
  EXPECT_EQ(ClickIntegerInput(-2), 0.0f);
  EXPECT_FLOAT_EQ(ClickIntegerInput(1382), std::log1p(1382.0f));
}

}  // namespace
}  // namespace cohort
