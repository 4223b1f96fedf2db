#include "services/common/job_id.h"

#include <unistd.h>

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

namespace cohort {

std::string NewJobId() {
  std::random_device random;
  return absl::StrFormat("job-%d-%08x", getpid(), random());
}

bool IsValidJobId(absl::string_view id) {
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return !id.empty();
}

}  // namespace cohort
