#ifndef COHORT_SERVICES_COMMON_DURABLE_FILE_H_
#define COHORT_SERVICES_COMMON_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Both write text to path through a temporary file beside it and a rename, so a reader never sees
// half of it. The error names the file; on one, the temporary file is gone.

// A file another process reads while it may be rewritten (port files, the launcher's token and
// metrics targets, which Prometheus watches).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view text);

// A file a crash must not leave half written (checkpoints): the file is fsynced before the
// rename and its folder after it, so a crash leaves the old file or the whole new one.
absl::Status WriteFileDurably(const std::string& path, absl::string_view text);

// A token or key: mode 0600, never readable by others, not even while it is written.
absl::Status WriteSecretFile(const std::string& path, absl::string_view text);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_DURABLE_FILE_H_
