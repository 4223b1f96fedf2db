#ifndef COHORT_TRAINER_IO_WHOLE_FILE_H_
#define COHORT_TRAINER_IO_WHOLE_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace cohort {

// The whole of a file (an image, a record, a certificate, a token, a checkpoint's manifest);
// NotFound naming it.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace cohort

#endif  // COHORT_TRAINER_IO_WHOLE_FILE_H_
