#include "services/common/open_files.h"

#include <sys/resource.h>

namespace cohort {

int64_t RaiseOpenFileLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return -1;
  if (files.rlim_cur < files.rlim_max) {
    const rlim_t before = files.rlim_cur;
    files.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) return static_cast<int64_t>(before);
  }
  return static_cast<int64_t>(files.rlim_cur);
}

}  // namespace cohort
