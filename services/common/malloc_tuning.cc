#include "services/common/malloc_tuning.h"

#include <malloc.h>

#include <climits>

namespace cohort {

void TuneMallocForBulkTransfers() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace cohort
