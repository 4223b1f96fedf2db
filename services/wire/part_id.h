#ifndef COHORT_SERVICES_WIRE_PART_ID_H_
#define COHORT_SERVICES_WIRE_PART_ID_H_

#include <cstdint>
#include <utility>

namespace cohort {

// A parameter part: the tensor's key and the part's index within it (trainer/kvstore/partition.h).
struct PartId {
  int64_t key = 0;
  int part = 0;
  bool operator==(const PartId& o) const { return key == o.key && part == o.part; }
  template <typename H>
  friend H AbslHashValue(H h, const PartId& p) {
    return H::combine(std::move(h), p.key, p.part);
  }
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_PART_ID_H_
