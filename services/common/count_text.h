#ifndef COHORT_SERVICES_COMMON_COUNT_TEXT_H_
#define COHORT_SERVICES_COMMON_COUNT_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace cohort {

// A count with its noun, for messages: "1 shard", "2 workers", "4 processes".
inline std::string Count(size_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : absl::EndsWith(noun, "s") ? "es" : "s");
}

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_COUNT_TEXT_H_
