#ifndef COHORT_SERVICES_COMMON_DURABLE_FILE_H_
#define COHORT_SERVICES_COMMON_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Writes text to path through a temporary file beside it and a rename, so a reader never sees
// half of it. With `durable`, the file is fsynced before the rename and its folder after it, so
// a crash leaves the old file or the whole new one. The error names the file; on one, the
// temporary file is gone.
absl::Status WriteThroughTemporary(const std::string& path, absl::string_view text,
                                   bool durable);

// A file a crash must not leave half written (checkpoints): WriteThroughTemporary, durable.
absl::Status WriteFileDurably(const std::string& path, absl::string_view text);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_DURABLE_FILE_H_
