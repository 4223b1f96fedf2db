#include "services/common/job_certs_testing.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "services/common/durable_file.h"

namespace cohort {

absl::Status MakeJobCerts(const std::string& dir, const std::string& names,
                          const std::string& env) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) {
    return absl::FailedPreconditionError("MakeJobCerts runs under bazel test only");
  }
  const std::string command = absl::StrCat(env, " ", srcdir, "/", workspace,
                                           "/tools/make_job_certs.sh ", dir, " ", names,
                                           " >/dev/null");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("failed: ", command));
  }
  return absl::OkStatus();
}

absl::Status WriteToken(const std::string& path, const std::string& token) {
  return WriteSecretFile(path, token + "\n");
}

absl::StatusOr<std::shared_ptr<const TransportSecurity>> LoadSecurity(
    const std::string& dir, const std::string& name, const std::string& token_file) {
  SecurityOptions o;
  o.insecure = false;
  o.tls_dir = dir;
  o.cert_name = name;
  o.token_file = token_file;
  return TransportSecurity::Load(o);
}

}  // namespace cohort
