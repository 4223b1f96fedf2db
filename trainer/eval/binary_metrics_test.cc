#include "trainer/eval/binary_metrics.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Every (positive, negative) pair: 1 when the positive scores above, a half on a tie.
double PairwiseAuc(const std::vector<float>& scores, const std::vector<int32_t>& labels) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[i] != 1 || labels[j] != 0) continue;
      wins += scores[i] > scores[j] ? 1.0 : scores[i] == scores[j] ? 0.5 : 0.0;
      pairs += 1;
    }
  }
  return wins / pairs;
}

TEST(RocAucTest, MatchesEveryPairCountedWithTies) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> scores;
    std::vector<int32_t> labels;
    for (int i = 0; i < 300; ++i) {
      // Few distinct scores: many ties.
      const int32_t label = random() % 3 == 0;
      scores.push_back(static_cast<float>(random() % 10 + 3 * label));
      labels.push_back(label);
    }
    absl::StatusOr<double> auc = RocAuc(scores, labels);
    ASSERT_TRUE(auc.ok()) << auc.status();
    EXPECT_NEAR(*auc, PairwiseAuc(scores, labels), 1e-12) << trial;
  }
}

TEST(RocAucTest, KnownValuesAndRefusals) {
  EXPECT_DOUBLE_EQ(*RocAuc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);  // scikit-learn's
  EXPECT_DOUBLE_EQ(*RocAuc({1, 2, 3}, {0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(*RocAuc({3, 2, 1}, {0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(*RocAuc({5, 5, 5, 5}, {0, 1, 0, 1}), 0.5);
  EXPECT_EQ(RocAuc({1, 2}, {1, 1}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RocAuc({1, 2}, {1}).status().message(), "2 scores for 1 labels");
  EXPECT_EQ(RocAuc({1, 2}, {0, 2}).status().message(), "label 1 is 2; a binary label is 0 or 1");
}

TEST(LogLossTest, IsTheMeanNegativeLogLikelihoodClipped) {
  const double expected = -(std::log(0.9) + std::log(1 - 0.2) + std::log(0.6)) / 3;
  EXPECT_NEAR(*LogLoss({0.9f, 0.2f, 0.6f}, {1, 0, 1}), expected, 1e-7);
  // A certain and wrong prediction costs the clip, not infinity.
  EXPECT_NEAR(*LogLoss({0.0f}, {1}), -std::log(1e-7), 1e-6);
  EXPECT_NEAR(*LogLoss({1.0f}, {0}), -std::log(1e-7), 1e-2);
  EXPECT_FALSE(LogLoss({}, {}).ok());
}

}  // namespace
}  // namespace cohort
