#ifndef COHORT_SERVICES_COMMON_LOG_SAFE_H_
#define COHORT_SERVICES_COMMON_LOG_SAFE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace cohort {

// Text a peer or a file controls (a certificate's name, a host name, a reason a member sent),
// made safe to put on one log line, a terminal or /status: a backslash, line breaks, tabs,
// control characters (ANSI escapes, NUL) and bytes outside printable ASCII are written as
// escapes (\\, \n, \r, \t, \x1b), so a peer can neither start a line that reads as another
// process's nor drive the terminal; past max_bytes of the original the rest is left out, saying
// how long it was.
std::string LogSafe(absl::string_view text, size_t max_bytes = 256);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_LOG_SAFE_H_
