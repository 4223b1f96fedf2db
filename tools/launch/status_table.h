#ifndef COHORT_TOOLS_LAUNCH_STATUS_TABLE_H_
#define COHORT_TOOLS_LAUNCH_STATUS_TABLE_H_

#include <string>

#include "absl/status/statusor.h"

namespace cohort::launch {

// The scheduler's /status JSON as the terminal table `launch --status` prints: a line for the
// job (state, size, mode, age, images/sec; why it ended, once it has), then one row per member
// with its state, host, and for workers step, epoch, images/sec, step time, comm share and
// loss. InvalidArgument when the text is not a status page.
absl::StatusOr<std::string> StatusTable(const std::string& status_json);

// `launch --status HOST:PORT [--tls_dir DIR --token_file FILE]`: the scheduler's /status page
// there (over HTTPS checked against DIR/ca.pem when tls_dir is given), as StatusTable prints
// it. InvalidArgument: the address, the token file or the TLS folder is wrong (a usage error);
// other errors say what answered, or that nothing did, and what to try.
absl::StatusOr<std::string> FetchStatusTable(const std::string& address,
                                             const std::string& token_file,
                                             const std::string& tls_dir);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_STATUS_TABLE_H_
