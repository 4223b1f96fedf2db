#ifndef COHORT_TOOLS_LAUNCH_TEST_TMP_DIR_H_
#define COHORT_TOOLS_LAUNCH_TEST_TMP_DIR_H_

#include <string>

#include "gtest/gtest.h"

namespace cohort::launch {

// The test's temporary folder, without gtest's trailing '/'.
inline std::string TmpDir() {
  std::string dir = testing::TempDir();
  if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_TEST_TMP_DIR_H_
