#include "services/common/data_path_tuning.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace cohort {
namespace {

// One pass over /proc/self/task: sets every listed thread not yet under SCHED_BATCH, counting
// them in *changed.
absl::Status SetListedThreads(int* changed) {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) {
    return absl::ErrnoToStatus(errno, "cannot list this process's threads in /proc/self/task");
  }
  absl::Status status;
  const sched_param priority{};  // SCHED_BATCH takes priority 0
  while (true) {
    errno = 0;
    const dirent* entry = readdir(tasks);
    if (entry == nullptr) {
      if (errno != 0) status = absl::ErrnoToStatus(errno, "cannot read /proc/self/task");
      break;
    }
    int tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;  // "." and ".."
    const int policy = sched_getscheduler(tid);
    if (policy == SCHED_BATCH || (policy < 0 && errno == ESRCH)) continue;  // ended since
    if (sched_setscheduler(tid, SCHED_BATCH, &priority) == 0) {
      ++*changed;
    } else if (errno != ESRCH && status.ok()) {
      status = absl::ErrnoToStatus(errno, absl::StrCat("cannot run thread ", tid,
                                                       " under SCHED_BATCH"));
    }
  }
  closedir(tasks);
  return status;
}

}  // namespace

absl::Status RunAsBatch() {
  // A listing may skip a live thread when others end while it is read: list again until a
  // pass finds every thread set. Threads started meanwhile inherit the policy of the thread
  // that starts them, set here in one pass or the next.
  for (int pass = 0; pass < 10; ++pass) {
    int changed = 0;
    if (absl::Status s = SetListedThreads(&changed); !s.ok()) return s;
    if (changed == 0) return absl::OkStatus();
  }
  return absl::OkStatus();
}

void SkipMutexDeadlockBookkeeping() {
  const char* detect = std::getenv("COHORT_MUTEX_DEADLOCK_DETECTION");
  if (detect == nullptr || std::string(detect) != "1") {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
}

void TuneForDataPath() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_ARENA_MAX, 1);
  SkipMutexDeadlockBookkeeping();
  const char* batch = std::getenv("COHORT_SCHED_BATCH");
  if (batch == nullptr || std::string(batch) != "0") {
    if (absl::Status s = RunAsBatch(); !s.ok()) {
      std::cerr << program_invocation_short_name << ": warning: " << s.message()
                << "; going on, the threads not set yet under the default policy "
                   "(COHORT_SCHED_BATCH=0 skips this)\n"
                << std::flush;
    }
  }
}

}  // namespace cohort
