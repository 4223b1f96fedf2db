#include "trainer/ops/embedding_bag.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/ops/op_testing.h"

namespace cohort {
namespace {

using testing::TensorOf;

// y and the rows' gradient of one Forward and Backward.
template <typename T>
std::pair<std::vector<T>, std::vector<T>> RunBag(EmbeddingBagSpec::Pooling pooling,
                                                 const Tensor& rows, const Tensor& indices,
                                                 const Tensor& offsets, const std::vector<T>& dy) {
  std::unique_ptr<Op> op = MakeHostEmbeddingBag({pooling});
  const std::vector<const Tensor*> in = {&rows, &indices, &offsets};
  absl::StatusOr<std::vector<Shape>> shapes =
      op->OutputShapes({rows.shape(), indices.shape(), offsets.shape()});
  EXPECT_TRUE(shapes.ok()) << shapes.status();
  Tensor y((*shapes)[0], DTypeOf<T>()), drows(rows.shape(), DTypeOf<T>());
  op->Forward(Mode::kTrain, in, {&y});
  const Tensor dy_t = TensorOf<T>(y.shape(), dy);
  op->Backward(in, {&y}, {&dy_t}, {&drows, nullptr, nullptr});
  const auto ys = y.span<T>(), ds = drows.span<T>();
  return {std::vector<T>(ys.begin(), ys.end()), std::vector<T>(ds.begin(), ds.end())};
}

TEST(EmbeddingBagTest, PoolsEachBagsRowsAndSendsTheGradientBackToThem) {
  // 3 rows of 2; bags {0, 2, 0}, {}, {1}.
  const Tensor rows = TensorOf<float>({3, 2}, {1, 2, 10, 20, 100, 200});
  const Tensor indices = TensorOf<int32_t>({4}, {0, 2, 0, 1});
  const Tensor offsets = TensorOf<int32_t>({3}, {0, 3, 3});
  const std::vector<float> dy = {1, 1, 5, 5, 3, 4};
  auto [y, drows] = RunBag<float>(EmbeddingBagSpec::Pooling::kSum, rows, indices, offsets, dy);
  EXPECT_EQ(y, (std::vector<float>{102, 204, 0, 0, 10, 20}));
  EXPECT_EQ(drows, (std::vector<float>{2, 2, 3, 4, 1, 1}));  // row 0 twice in bag 0
  auto [mean, dmean] = RunBag<float>(EmbeddingBagSpec::Pooling::kMean, rows, indices, offsets, dy);
  EXPECT_EQ(mean, (std::vector<float>{34, 68, 0, 0, 10, 20}));  // the empty bag: zeros
  EXPECT_FLOAT_EQ(dmean[0], 2.0f / 3);
  EXPECT_FLOAT_EQ(dmean[2], 3.0f);
  EXPECT_FLOAT_EQ(dmean[4], 1.0f / 3);
}

TEST(EmbeddingBagTest, IsTheBagsIncidenceMatrixTimesTheRowsAndItsAdjoint) {
  std::mt19937 random(5);
  constexpr int kRows = 7, kDim = 3, kBags = 5;
  std::vector<double> rows(kRows * kDim), dy(kBags * kDim);
  std::normal_distribution<double> normal;
  for (double& x : rows) x = normal(random);
  for (double& x : dy) x = normal(random);
  std::vector<int32_t> indices, offsets;
  for (int b = 0; b < kBags; ++b) {
    offsets.push_back(static_cast<int32_t>(indices.size()));
    for (int k = 0; k < static_cast<int>(random() % 4); ++k) indices.push_back(random() % kRows);
  }
  for (auto pooling : {EmbeddingBagSpec::Pooling::kSum, EmbeddingBagSpec::Pooling::kMean}) {
    // A (B × U): bag b's count of row u, over the bag's size for a mean.
    std::vector<double> a(kBags * kRows, 0.0);
    for (int b = 0; b < kBags; ++b) {
      const int begin = offsets[b];
      const int end = b + 1 < kBags ? offsets[b + 1] : static_cast<int>(indices.size());
      for (int k = begin; k < end; ++k) {
        a[b * kRows + indices[k]] +=
            pooling == EmbeddingBagSpec::Pooling::kMean ? 1.0 / (end - begin) : 1.0;
      }
    }
    auto [y, drows] =
        RunBag<double>(pooling, TensorOf<double>({kRows, kDim}, rows),
                       TensorOf<int32_t>({static_cast<int64_t>(indices.size())}, indices),
                       TensorOf<int32_t>({kBags}, offsets), dy);
    for (int b = 0; b < kBags; ++b) {
      for (int i = 0; i < kDim; ++i) {
        double want = 0;
        for (int u = 0; u < kRows; ++u) want += a[b * kRows + u] * rows[u * kDim + i];
        EXPECT_NEAR(y[b * kDim + i], want, 1e-12);
      }
    }
    for (int u = 0; u < kRows; ++u) {  // Aᵀ · dy
      for (int i = 0; i < kDim; ++i) {
        double want = 0;
        for (int b = 0; b < kBags; ++b) want += a[b * kRows + u] * dy[b * kDim + i];
        EXPECT_NEAR(drows[u * kDim + i], want, 1e-12);
      }
    }
  }
}

TEST(EmbeddingBagTest, RefusesInputsOfTheWrongRank) {
  std::unique_ptr<Op> op = MakeHostEmbeddingBag({});
  EXPECT_EQ(op->name(), "embedding_bag");
  const absl::Status refused = op->OutputShapes({{3, 2}, {4, 1}, {3}}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("embedding_bag: want rows (U,D), indices (L), offsets (B)"),
            std::string::npos)
      << refused;
  EXPECT_FALSE(op->OutputShapes({{3, 2}, {4}}).ok());
}

}  // namespace
}  // namespace cohort
