#ifndef COHORT_SERVICES_COMMON_SECURITY_FLAGS_H_
#define COHORT_SERVICES_COMMON_SECURITY_FLAGS_H_

#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "services/common/transport_security.h"

// How a role's gRPC traffic is secured (Contracts: --tls_dir, --token_file, --insecure). Each
// role's <binary>_main.cc expands COHORT_DEFINE_SECURITY_FLAGS() at file scope, so its --help
// lists them.
#define COHORT_DEFINE_SECURITY_FLAGS()                                                          \
  ABSL_FLAG(std::string, tls_dir, "",                                                           \
            "folder of the job's TLS files: ca.pem and this role's <role>.pem/<role>.key "       \
            "(tools/make_job_certs.sh); peers must present certificates from the same CA");     \
  ABSL_FLAG(std::string, token_file, "",                                                        \
            "file holding the job's token, sent and checked on every call (needs --tls_dir)");  \
  ABSL_FLAG(bool, insecure, false,                                                              \
            "plaintext, no certificates and no token: only for a job on one machine's loopback")

ABSL_DECLARE_FLAG(std::string, tls_dir);
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(bool, insecure);

namespace cohort {

// Whether --tls_dir or --insecure was given.
bool SecurityFlagsGiven();

// The security the flags ask for, with the certificate of `role` ("scheduler", "shard",
// "worker"); exactly one of --tls_dir and --insecure must be given. Relative paths resolve
// against the user's directory (BUILD_WORKING_DIRECTORY under `bazel run`).
absl::StatusOr<std::shared_ptr<const TransportSecurity>> SecurityFromFlags(
    const std::string& role);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_SECURITY_FLAGS_H_
