#ifndef COHORT_SERVICES_COMMON_JOB_CERTS_TESTING_H_
#define COHORT_SERVICES_COMMON_JOB_CERTS_TESTING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/common/transport_security.h"

namespace cohort {

// For tests (data: //tools:make_job_certs.sh): a job's TLS files, made by the real script.
// `env` goes before the command (e.g. COHORT_CERT_DATES='...' for expired certificates).
absl::Status MakeJobCerts(const std::string& dir, const std::string& names,
                          const std::string& env = "");
// Writes a token file.
absl::Status WriteToken(const std::string& path, const std::string& token);
// The security of certificate `name` in dir, with the token in token_file ("": none).
absl::StatusOr<std::shared_ptr<const TransportSecurity>> LoadSecurity(
    const std::string& dir, const std::string& name, const std::string& token_file);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_JOB_CERTS_TESTING_H_
