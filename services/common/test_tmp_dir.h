#ifndef COHORT_SERVICES_COMMON_TEST_TMP_DIR_H_
#define COHORT_SERVICES_COMMON_TEST_TMP_DIR_H_

#include <string>

#include "gtest/gtest.h"

namespace cohort {

// For tests: the test's temporary folder (TEST_TMPDIR under bazel), without gtest's trailing '/'.
inline std::string TmpDir() {
  std::string dir = testing::TempDir();
  if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_TEST_TMP_DIR_H_
