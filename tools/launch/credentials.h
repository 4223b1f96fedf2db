#ifndef COHORT_TOOLS_LAUNCH_CREDENTIALS_H_
#define COHORT_TOOLS_LAUNCH_CREDENTIALS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/launch/launch_options.h"

namespace cohort::launch {

// Makes what a TLS job (options.tls) lacks in its scratch folder (0700), and points `options` at
// it: without tls_dir, a job CA with a certificate per role, made by options.make_job_certs
// (tools/make_job_certs.sh) in scratch_dir/tls; without token_file, a token of 256 random bits
// in scratch_dir/token. Errors name what failed and the script's output.
absl::Status MakeCredentials(LaunchOptions& options, const std::string& scratch_dir);

// The first bytes a remote member's stdin gets (remote.h's RunDirFiles): each (name, path here)
// of `files` read and packed as a file of its run folder.
absl::StatusOr<std::string> ReadRunDirFiles(
    const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_CREDENTIALS_H_
