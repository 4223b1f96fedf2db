#include "trainer/kvstore/table_split.h"

namespace cohort {
namespace {

// splitmix64's finaliser: the low bits of a key (a row index) become as random as its high.
uint64_t Mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

int ShardOfRow(const TableSpec& spec, uint64_t id, int num_shards) {
  const uint64_t key =
      spec.kind == TableSpec::Kind::kFixed ? id % static_cast<uint64_t>(spec.rows) : id;
  return static_cast<int>(Mix(key) % static_cast<uint64_t>(num_shards));
}

TableSplit SplitRows(const TableSpec& spec, absl::Span<const uint64_t> ids, int num_shards) {
  TableSplit split;
  split.ids.resize(num_shards);
  split.shard_of.reserve(ids.size());
  split.position.reserve(ids.size());
  for (uint64_t id : ids) {
    const int shard = ShardOfRow(spec, id, num_shards);
    split.shard_of.push_back(shard);
    split.position.push_back(static_cast<int64_t>(split.ids[shard].size()));
    split.ids[shard].push_back(id);
  }
  return split;
}

}  // namespace cohort
