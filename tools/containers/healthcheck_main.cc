// healthcheck: a container image's HEALTHCHECK. Exits 0 when the role's HTTP server on this
// host answers /healthz with 200, else 1 saying what it got; the images carry no shell or curl.
//   healthcheck --port=7001

#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "services/common/http_server.h"
#include "services/common/metrics.h"

ABSL_FLAG(int, port, 0, "the role's metrics port (required)");
ABSL_FLAG(std::string, host, "127.0.0.1", "the host to ask");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Exits 0 when a Cohort role on this host is serving /healthz.");
  absl::ParseCommandLine(argc, argv);
  const int port = absl::GetFlag(FLAGS_port);
  if (port <= 0) {
    std::cerr << "healthcheck: error: --port=PORT (the role's --metrics_port) is required\n";
    return 2;
  }
  auto answer = cohort::HttpGet(absl::GetFlag(FLAGS_host), port, cohort::kHealthPath);
  if (!answer.ok()) {
    std::cerr << "healthcheck: " << answer.status().message() << "\n";
    return 1;
  }
  if (answer->status != 200) {
    std::cerr << "healthcheck: " << cohort::kHealthPath << " answered " << answer->status << "\n";
    return 1;
  }
  return 0;
}
