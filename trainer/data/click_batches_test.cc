#include "trainer/data/click_batches.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// A log of n lines: line i's label i % 2, I1 = i, C1 = i (hex), the rest missing.
std::string WriteLog(const std::string& name, int n) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    ClickRecord r;
    r.label = i % 2;
    r.integers[0] = i;
    r.categories[0] = static_cast<uint32_t>(i);
    r.present = 1 | (uint64_t{1} << kClickIntegerFeatures);
    out << FormatClickLine(r) << "\n";
  }
  return path;
}

std::vector<ClickBatch> ReadAll(const std::string& path, int64_t batch, int rank, int workers) {
  auto reader = ClickBatchReader::Open(path, batch, rank, workers);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<ClickBatch> batches;
  ClickBatch b;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&b);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    batches.push_back(b);
  }
  return batches;
}

TEST(ClickBatchReaderTest, TwoRanksSplitEachStepAsOneProcessReadsIt) {
  const std::string path = WriteLog("log.txt", 23);
  const std::vector<ClickBatch> one = ReadAll(path, 6, 0, 1);
  const std::vector<ClickBatch> r0 = ReadAll(path, 3, 0, 2), r1 = ReadAll(path, 3, 1, 2);
  ASSERT_EQ(one.size(), 3u);  // 23 lines: 3 steps of 6, the last 5 dropped
  ASSERT_EQ(r0.size(), 3u);
  ASSERT_EQ(r1.size(), 3u);
  for (size_t s = 0; s < one.size(); ++s) {
    ASSERT_EQ(one[s].size, 6);
    ASSERT_EQ(r0[s].size, 3);
    std::vector<int32_t> labels = r0[s].labels;
    labels.insert(labels.end(), r1[s].labels.begin(), r1[s].labels.end());
    EXPECT_EQ(labels, one[s].labels);
    std::vector<uint64_t> ids = r0[s].ids;
    ids.insert(ids.end(), r1[s].ids.begin(), r1[s].ids.end());
    EXPECT_EQ(ids, one[s].ids);
    std::vector<float> dense = r0[s].dense;
    dense.insert(dense.end(), r1[s].dense.begin(), r1[s].dense.end());
    EXPECT_EQ(dense, one[s].dense);
  }
  // Step 1, rank 1: lines 9, 10, 11.
  EXPECT_EQ(r1[1].labels, (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(r1[1].dense[0], ClickIntegerInput(9));
  EXPECT_EQ(r1[1].dense[1], 0.0f);  // I2 missing
  EXPECT_EQ(r1[1].ids[0], ClickFeatureId(0, 9));
  EXPECT_EQ(r1[1].ids[1], ClickFeatureId(1, 0));  // C2 missing: value 0
  ASSERT_EQ(r1[1].ids.size(), 3u * kClickCategoricalFeatures);
}

TEST(ClickBatchReaderTest, RefusesARankOutsideTheJobAndPassesTheLogsErrorsOn) {
  const std::string path = WriteLog("short.txt", 4);
  EXPECT_FALSE(ClickBatchReader::Open(path, 2, 2, 2).ok());
  EXPECT_FALSE(ClickBatchReader::Open(path, 0, 0, 1).ok());
  EXPECT_EQ(ClickBatchReader::Open(path + ".missing", 2, 0, 1).status().code(),
            absl::StatusCode::kNotFound);
  { std::ofstream(path, std::ios::app) << "2\tbad\n"; }
  auto reader = ClickBatchReader::Open(path, 5, 0, 1);
  ASSERT_TRUE(reader.ok());
  ClickBatch b;
  absl::StatusOr<bool> step = (*reader)->Next(&b);
  EXPECT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("line 5: "), std::string::npos) << step.status();
}

}  // namespace
}  // namespace cohort
