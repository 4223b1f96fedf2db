#ifndef COHORT_SERVICES_COMMON_CPU_LIST_H_
#define COHORT_SERVICES_COMMON_CPU_LIST_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cohort {

// The CPUs the calling thread may run on (sched_getaffinity), ascending.
std::vector<int> AllowedCpus();

// The kernel's CPU list form ("0-3,8"), as /proc/<pid>/status's Cpus_allowed_list and taskset
// write it. cpus ascending, without repeats.
std::string FormatCpuList(absl::Span<const int> cpus);
// Its inverse; InvalidArgument naming the list when it is not one.
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view list);

// Confines the calling thread, and every thread it starts from now on (an OpenMP team, a data
// loader's), to cpus. Call it before the process starts threads to confine the whole process.
absl::Status ConfineToCpus(absl::Span<const int> cpus);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_CPU_LIST_H_
