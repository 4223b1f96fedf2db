#ifndef COHORT_TRAINER_KVSTORE_TABLE_SPLIT_H_
#define COHORT_TRAINER_KVSTORE_TABLE_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "trainer/kvstore/embedding_table.h"

namespace cohort {

// Which shard keeps an embedding table's row: by a hash of the row's key (a fixed table's row
// index, a collisionless table's id), not by ranges. Click logs' ids are Zipf-distributed and
// a table's hot rows are few: ranges of a fixed table's rows, or of ids a user did not hash,
// would put them together on one shard, which then serves most of every batch; a hash spreads
// any set of keys evenly, and needs no boundaries kept in step between processes (every
// worker computes the same shard from the key alone). Every shard holds some rows of every
// table; a table's rows on a shard are an EmbeddingTable of their own (keys unchanged).
int ShardOfRow(const TableSpec& spec, uint64_t id, int num_shards);

// A batch's ids grouped by shard for one pull or push: ids[i] goes to shard shard_of[i], as the
// position[i]-th id of that shard's list; each shard's ids in the batch's order.
struct TableSplit {
  std::vector<std::vector<uint64_t>> ids;  // by shard
  std::vector<int> shard_of;               // by the batch's id
  std::vector<int64_t> position;           // by the batch's id
};
TableSplit SplitRows(const TableSpec& spec, absl::Span<const uint64_t> ids, int num_shards);

}  // namespace cohort

#endif  // COHORT_TRAINER_KVSTORE_TABLE_SPLIT_H_
