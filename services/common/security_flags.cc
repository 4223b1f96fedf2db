#include "services/common/security_flags.h"

#include <cstdlib>

#include "trainer/cli/args.h"

namespace cohort {

bool SecurityFlagsGiven() {
  return !absl::GetFlag(FLAGS_tls_dir).empty() || absl::GetFlag(FLAGS_insecure);
}

absl::StatusOr<std::shared_ptr<const TransportSecurity>> SecurityFromFlags(
    const std::string& role) {
  SecurityOptions o;
  o.insecure = absl::GetFlag(FLAGS_insecure);
  const std::string dir = UserDirectory();
  o.tls_dir = ResolveUserPath(absl::GetFlag(FLAGS_tls_dir), dir);
  o.token_file = ResolveUserPath(absl::GetFlag(FLAGS_token_file), dir);
  o.cert_name = role;
  if (o.insecure && !o.tls_dir.empty()) {
    return absl::InvalidArgumentError("--insecure and --tls_dir: choose one");
  }
  return TransportSecurity::Load(o);
}

}  // namespace cohort
