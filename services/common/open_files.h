#ifndef COHORT_SERVICES_COMMON_OPEN_FILES_H_
#define COHORT_SERVICES_COMMON_OPEN_FILES_H_

#include <cstdint>

namespace cohort {

// Raises this process's soft limit of open files to its hard limit, and returns the limit now
// in force. A scheduler holds a connection per member and a shard one per worker: Debian's
// usual soft limit of 1,024 would refuse connections of a job past about a thousand members
// (the hard limit is far higher).
int64_t RaiseOpenFileLimit();

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_OPEN_FILES_H_
