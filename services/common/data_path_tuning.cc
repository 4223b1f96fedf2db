#include "services/common/data_path_tuning.h"

#include <malloc.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"

namespace cohort {

void TuneForDataPath() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_ARENA_MAX, 1);
  const char* detect = std::getenv("COHORT_MUTEX_DEADLOCK_DETECTION");
  if (detect == nullptr || std::string(detect) != "1") {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
}

}  // namespace cohort
