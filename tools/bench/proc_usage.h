#ifndef COHORT_TOOLS_BENCH_PROC_USAGE_H_
#define COHORT_TOOLS_BENCH_PROC_USAGE_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/time/time.h"

namespace cohort {

// What another process (by pid) has used so far, as /proc tells it, for benchmarks that watch
// a server: user + system CPU time (zero when it cannot be read), and resident memory in bytes.
absl::Duration ProcessCpuTime(pid_t pid);
int64_t ProcessResidentBytes(pid_t pid);

}  // namespace cohort

#endif  // COHORT_TOOLS_BENCH_PROC_USAGE_H_
