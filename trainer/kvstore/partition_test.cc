#include "trainer/kvstore/partition.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "trainer/base/check.h"
#include "trainer/models/models.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

std::vector<TensorSize> ModelTensors(const std::string& name, const Shape& sample, int classes) {
  OnednnBackend dnn;
  auto model = BuildModel(name, &dnn, sample, classes);
  COHORT_CHECK(model.ok(), "%s", std::string(model.status().message()).c_str());
  std::vector<TensorSize> sizes;
  for (const Parameter* p : (*model)->parameters()) sizes.push_back({p->value.numel(), 4});
  return sizes;
}

// Every element of every tensor lies in exactly one part, parts of a key are in order and
// contiguous, none exceeds the part size (unless one element does), and the shard totals add up.
void ExpectExactCover(absl::Span<const TensorSize> tensors, const PartitionMap& map,
                      int64_t part_bytes) {
  ASSERT_EQ(map.key_parts.size(), tensors.size());
  std::vector<int64_t> shard_bytes(map.num_shards, 0);
  size_t seen = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    int64_t next = 0;
    for (size_t j = 0; j < map.key_parts[k].size(); ++j) {
      const Part& p = map.parts[map.key_parts[k][j]];
      EXPECT_EQ(p.key, static_cast<int64_t>(k));
      EXPECT_EQ(p.index, static_cast<int>(j));
      EXPECT_EQ(p.offset, next) << "key " << k << " part " << j;
      EXPECT_GT(p.elements, 0);
      EXPECT_EQ(p.bytes, p.elements * tensors[k].element_bytes);
      EXPECT_TRUE(p.bytes <= part_bytes || p.elements == 1) << p.bytes;
      ASSERT_GE(p.shard, 0);
      ASSERT_LT(p.shard, map.num_shards);
      shard_bytes[p.shard] += p.bytes;
      next += p.elements;
      ++seen;
    }
    EXPECT_EQ(next, tensors[k].elements) << "key " << k;
  }
  EXPECT_EQ(seen, map.parts.size());
  EXPECT_EQ(shard_bytes, map.shard_bytes);
}

TEST(PartitionTest, HandCheckedSplit) {
  // 10 floats with 16-byte parts: 3 parts of 4, 3, 3 elements; 3 floats fit one part.
  const std::vector<TensorSize> t = {{10, 4}, {3, 4}};
  auto map = PartitionParameters(t, 2, 16);
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->parts.size(), 4u);
  EXPECT_EQ(map->parts[0].elements, 4);
  EXPECT_EQ(map->parts[1].offset, 4);
  EXPECT_EQ(map->parts[1].elements, 3);
  EXPECT_EQ(map->parts[2].offset, 7);
  EXPECT_EQ(map->parts[3].key, 1);
  // Largest first, each to the shard holding least: 16 → shard 0; 12 → 1 (12); 12 → 1 (24,
  // since 12 < 16); 12 → 0 (28, since 16 < 24).
  EXPECT_EQ(map->parts[0].shard, 0);
  EXPECT_EQ(map->parts[3].shard, 0);
  EXPECT_EQ(map->shard_bytes, (std::vector<int64_t>{28, 24}));
  ExpectExactCover(t, *map, 16);
}

TEST(PartitionTest, EveryByteAssignedExactlyOnce) {
  const std::vector<TensorSize> mixed = {{1, 4},      {7, 2},    {1000, 4}, {262144, 4},
                                         {262145, 4}, {99991, 2}, {5, 4},   {1 << 20, 4}};
  for (int shards : {1, 2, 3, 4, 7}) {
    for (int64_t part_bytes : {4, 1000, 16 << 10, 1 << 20}) {
      auto map = PartitionParameters(mixed, shards, part_bytes);
      ASSERT_TRUE(map.ok()) << map.status();
      ExpectExactCover(mixed, *map, part_bytes);
    }
  }
  const auto lenet = ModelTensors("lenet", Shape{1, 28, 28}, 10);
  for (int shards : {1, 2, 4}) {
    auto map = PartitionParameters(lenet, shards, 16 << 10);
    ASSERT_TRUE(map.ok());
    ExpectExactCover(lenet, *map, 16 << 10);
  }
}

TEST(PartitionTest, Resnet50OverFourShardsIsBalanced) {
  const auto r50 = ModelTensors("resnet50", Shape{3, 224, 224}, 1000);
  auto map = PartitionParameters(r50, 4, 1 << 20);
  ASSERT_TRUE(map.ok());
  ExpectExactCover(r50, *map, 1 << 20);
  int64_t total = 0;
  for (int64_t b : map->shard_bytes) total += b;
  EXPECT_EQ(total, 25557032LL * 4);
  const double mean = static_cast<double>(total) / 4;
  const int64_t largest = *std::max_element(map->shard_bytes.begin(), map->shard_bytes.end());
  EXPECT_LE(largest, 1.1 * mean) << largest << " vs mean " << mean;
}

TEST(PartitionTest, NoShardHoldsEverything) {
  // LeNet's tensors are all under 1 MiB; one tensor of 10 elements over 4 shards still spreads.
  const auto lenet = ModelTensors("lenet", Shape{1, 28, 28}, 10);
  auto map = PartitionParameters(lenet, 2, 1 << 20);
  ASSERT_TRUE(map.ok());
  for (int64_t b : map->shard_bytes) EXPECT_GT(b, 0);
  auto tiny = PartitionParameters(std::vector<TensorSize>{{10, 4}}, 4, 1 << 20);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->parts.size(), 4u);
  for (int64_t b : tiny->shard_bytes) EXPECT_GT(b, 0);
  ExpectExactCover(std::vector<TensorSize>{{10, 4}}, *tiny, 1 << 20);
}

TEST(PartitionTest, DeterministicWithAFingerprintThatTellsMapsApart) {
  const auto lenet = ModelTensors("lenet", Shape{1, 28, 28}, 10);
  auto a = PartitionParameters(lenet, 2, 16 << 10);
  auto b = PartitionParameters(lenet, 2, 16 << 10);
  auto c = PartitionParameters(lenet, 3, 16 << 10);
  auto d = PartitionParameters(lenet, 2, 32 << 10);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(a->Fingerprint(), b->Fingerprint());
  for (size_t i = 0; i < a->parts.size(); ++i) EXPECT_EQ(a->parts[i].shard, b->parts[i].shard);
  EXPECT_NE(a->Fingerprint(), c->Fingerprint());
  EXPECT_NE(a->Fingerprint(), d->Fingerprint());
}

TEST(PartitionTest, BadInputsAreNamed) {
  const std::vector<TensorSize> t = {{4, 4}, {0, 4}};
  EXPECT_EQ(PartitionParameters(t, 2, 1024).status().message(),
            "partition: key 1 has 0 elements of 4 bytes; tensors must be non-empty");
  EXPECT_FALSE(PartitionParameters(std::vector<TensorSize>{{4, 4}}, 0, 1024).ok());
  EXPECT_FALSE(PartitionParameters(std::vector<TensorSize>{{4, 4}}, 2, 0).ok());
}

}  // namespace
}  // namespace cohort
