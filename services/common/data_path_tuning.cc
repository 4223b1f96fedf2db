#include "services/common/data_path_tuning.h"

#include <dirent.h>
#include <malloc.h>
#include <sched.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

absl::Status RunAsBatch() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot list this process's threads in /proc/self/task: ", std::strerror(errno)));
  }
  absl::Status status;
  const sched_param priority{};  // SCHED_BATCH takes priority 0
  // Threads started meanwhile inherit the policy of the thread that starts them, set here
  // before or after; the calling thread's own comes first.
  if (sched_setscheduler(0, SCHED_BATCH, &priority) != 0) {
    status = absl::PermissionDeniedError(
        absl::StrCat("cannot run this thread under SCHED_BATCH: ", std::strerror(errno)));
  }
  while (const dirent* entry = readdir(tasks)) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;  // "." and ".."
    // A thread that ended since the listing is no failure.
    if (sched_setscheduler(tid, SCHED_BATCH, &priority) != 0 && errno != ESRCH && status.ok()) {
      status = absl::PermissionDeniedError(absl::StrCat(
          "cannot run thread ", tid, " under SCHED_BATCH: ", std::strerror(errno)));
    }
  }
  closedir(tasks);
  return status;
}

void TuneForDataPath() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_ARENA_MAX, 1);
  const char* detect = std::getenv("COHORT_MUTEX_DEADLOCK_DETECTION");
  if (detect == nullptr || std::string(detect) != "1") {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  const char* batch = std::getenv("COHORT_SCHED_BATCH");
  if (batch == nullptr || std::string(batch) != "0") {
    if (absl::Status s = RunAsBatch(); !s.ok()) {
      std::cerr << "warning: " << s.message()
                << "; going on under the default policy (COHORT_SCHED_BATCH=0 skips this)\n"
                << std::flush;
    }
  }
}

}  // namespace cohort
