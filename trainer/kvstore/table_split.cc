#include "trainer/kvstore/table_split.h"

#include "trainer/base/random.h"

namespace cohort {

int ShardOfRow(const TableSpec& spec, uint64_t id, int num_shards) {
  const uint64_t key =
      spec.kind == TableSpec::Kind::kFixed ? id % static_cast<uint64_t>(spec.rows) : id;
  return static_cast<int>(MixBits(key) % static_cast<uint64_t>(num_shards));
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
