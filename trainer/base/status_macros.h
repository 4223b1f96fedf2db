#ifndef COHORT_TRAINER_BASE_STATUS_MACROS_H_
#define COHORT_TRAINER_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define COHORT_CONCAT_INNER(a, b) a##b
#define COHORT_CONCAT(a, b) COHORT_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status cohort_status_ = (expr);      \
    if (!cohort_status_.ok()) return cohort_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, F()): binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  COHORT_ASSIGN_OR_RETURN_IMPL(COHORT_CONCAT(cohort_statusor_, __LINE__), lhs, expr)
#define COHORT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#endif  // COHORT_TRAINER_BASE_STATUS_MACROS_H_
