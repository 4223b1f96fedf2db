#ifndef COHORT_SERVICES_COMMON_JOB_ID_H_
#define COHORT_SERVICES_COMMON_JOB_ID_H_

#include <string>

#include "absl/strings/string_view.h"

namespace cohort {

// A job id unlikely to collide with any other on the machine: job-<pid>-<random hex>. The
// launcher and a scheduler started by hand without --job_id make their ids alike.
std::string NewJobId();

// Whether `id` is a usable job id: non-empty, only letters, digits, '.', '_' and '-' (it goes
// into file names, metric labels and the processes' COHORT_JOB_ID marker).
bool IsValidJobId(absl::string_view id);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_JOB_ID_H_
