#ifndef COHORT_TRAINER_BASE_CHECK_H_
#define COHORT_TRAINER_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

// COHORT_CHECK(cond, "fmt", args...): for programmer invariants only (a broken one is a bug in
// Cohort, never bad input). Prints where and why, then aborts. Input, disk and network errors
// are absl::Status instead.
#define COHORT_CHECK(cond, ...)                                                   \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                          \
      std::fputc('\n', stderr);                                                   \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

#endif  // COHORT_TRAINER_BASE_CHECK_H_
