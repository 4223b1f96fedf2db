#include "tools/data/planted_clicks.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "trainer/eval/binary_metrics.h"

namespace cohort {
namespace {

TEST(PlantedClicksTest, TheSameSeedGivesTheSameLinesAndAnotherOthers) {
  PlantedClicks a({.seed = 5}), b({.seed = 5}), c({.seed = 6});
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    float pa, pb, pc;
    const std::string la = FormatClickLine(a.Next(&pa));
    EXPECT_EQ(la, FormatClickLine(b.Next(&pb)));
    EXPECT_EQ(pa, pb);
    differ += la != FormatClickLine(c.Next(&pc));
  }
  EXPECT_EQ(differ, 200);
}

TEST(PlantedClicksTest, LinesParseBackAndTheModelReadsThemAsWritten) {
  PlantedClicks clicks({.seed = 3});
  for (int i = 0; i < 500; ++i) {
    float p;
    const ClickRecord r = clicks.Next(&p);
    ClickRecord back;
    ASSERT_TRUE(ParseClickLine(FormatClickLine(r), &back).ok());
    // What a trainer reads is what the probability was computed on.
    EXPECT_EQ(static_cast<float>(clicks.Probability(back)), p);
  }
}

TEST(PlantedClicksTest, ValuesAreZipfDistributedAndTheModelIsLearnableButNotTrivial) {
  PlantedClicks clicks({.seed = 11, .vocabulary = 10000, .head = 500});
  std::vector<float> p;
  std::vector<int32_t> labels;
  absl::flat_hash_map<uint32_t, int> counts;  // of feature C1's values
  int missing = 0;
  for (int i = 0; i < 40000; ++i) {
    float q;
    const ClickRecord r = clicks.Next(&q);
    p.push_back(q);
    labels.push_back(r.label);
    if (r.has_category(0)) {
      ++counts[r.categories[0]];
    } else {
      ++missing;
    }
  }
  // The most frequent value about 1/H(10000)^1.05 of the lines, many values seen once.
  int top = 0, once = 0;
  for (const auto& [value, n] : counts) {
    top = std::max(top, n);
    once += n == 1;
  }
  EXPECT_GT(top, 3000);
  EXPECT_LT(top, 6000);
  EXPECT_GT(once, 1000);
  EXPECT_NEAR(missing / 40000.0, 0.05, 0.01);
  double clicked = 0;
  for (int32_t label : labels) clicked += label;
  EXPECT_GT(clicked / labels.size(), 0.15);
  EXPECT_LT(clicked / labels.size(), 0.4);
  const double auc = *RocAuc(p, labels);
  EXPECT_GT(auc, 0.7);
  EXPECT_LT(auc, 0.9);
}

}  // namespace
}  // namespace cohort
