#include "trainer/kvstore/partition.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "trainer/base/random.h"

namespace cohort {

uint64_t PartitionMap::Fingerprint() const {
  uint64_t h = MixKeys({static_cast<uint64_t>(num_shards), parts.size()});
  for (const Part& p : parts) {
    h = MixKeys({h, static_cast<uint64_t>(p.key), static_cast<uint64_t>(p.index),
                 static_cast<uint64_t>(p.offset), static_cast<uint64_t>(p.elements),
                 static_cast<uint64_t>(p.bytes), static_cast<uint64_t>(p.shard)});
  }
  return h;
}

absl::StatusOr<PartitionMap> PartitionParameters(absl::Span<const TensorSize> tensors,
                                                 int num_shards, int64_t part_bytes) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("partition: ", num_shards, " shards; need >= 1"));
  }
  if (part_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition: part size ", part_bytes, " bytes; need >= 1"));
  }
  // Parts per tensor: enough to keep each within part_bytes (at least one element each).
  std::vector<int64_t> pieces(tensors.size());
  int64_t total_pieces = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorSize& t = tensors[k];
    if (t.elements < 1 || t.element_bytes < 1) {
      return absl::InvalidArgumentError(absl::StrCat("partition: key ", k, " has ", t.elements,
                                                     " elements of ", t.element_bytes,
                                                     " bytes; tensors must be non-empty"));
    }
    const int64_t per_part = std::max<int64_t>(1, part_bytes / t.element_bytes);
    pieces[k] = (t.elements + per_part - 1) / per_part;
    total_pieces += pieces[k];
  }
  // Fewer parts than shards would leave shards idle and one holding whole tensors: split the
  // tensor with the largest parts once more until there are enough (or nothing can split).
  while (total_pieces < num_shards) {
    int64_t best = -1;
    for (size_t k = 0; k < tensors.size(); ++k) {
      if (pieces[k] >= tensors[k].elements) continue;
      const auto part_size = [&](size_t i) {
        return tensors[i].elements * tensors[i].element_bytes / pieces[i];
      };
      if (best < 0 || part_size(k) > part_size(static_cast<size_t>(best))) best = static_cast<int64_t>(k);
    }
    if (best < 0) break;
    ++pieces[best];
    ++total_pieces;
  }

  PartitionMap map;
  map.num_shards = num_shards;
  map.key_parts.resize(tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const int64_t n = tensors[k].elements;
    for (int64_t i = 0; i < pieces[k]; ++i) {
      // Near-equal slices: the first n % pieces get one element more.
      const int64_t base = n / pieces[k], extra = n % pieces[k];
      Part p;
      p.key = static_cast<int64_t>(k);
      p.index = static_cast<int>(i);
      p.offset = i * base + std::min(i, extra);
      p.elements = base + (i < extra ? 1 : 0);
      p.bytes = p.elements * tensors[k].element_bytes;
      map.key_parts[k].push_back(static_cast<int>(map.parts.size()));
      map.parts.push_back(p);
    }
  }
  // Longest-processing-time-first balancing; the sort is stable so ties keep model order.
  std::vector<int> order(map.parts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return map.parts[a].bytes > map.parts[b].bytes; });
  map.shard_bytes.assign(num_shards, 0);
  for (int i : order) {
    const int shard = static_cast<int>(
        std::min_element(map.shard_bytes.begin(), map.shard_bytes.end()) - map.shard_bytes.begin());
    map.parts[i].shard = shard;
    map.shard_bytes[shard] += map.parts[i].bytes;
  }
  return map;
}

}  // namespace cohort
