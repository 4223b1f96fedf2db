// healthcheck: a container image's HEALTHCHECK. Exits 0 when the role's HTTP server on this
// host answers /healthz with 200, else 1 saying what it got; the images carry no shell or curl.
// The port comes from the file the role writes (--metrics_port_file), so a container that
// overrides the role's --metrics_port stays checked.
//   healthcheck --port_file=/tmp/metrics.port

#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "services/common/http_server.h"
#include "services/common/metrics.h"
#include "services/common/port_file.h"

ABSL_FLAG(int, port, 0, "the role's metrics port");
ABSL_FLAG(std::string, port_file, "", "else the file the role wrote it to (--metrics_port_file)");
ABSL_FLAG(std::string, host, "127.0.0.1", "the host to ask");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Exits 0 when a Cohort role on this host is serving /healthz.");
  absl::ParseCommandLine(argc, argv);
  int port = absl::GetFlag(FLAGS_port);
  if (const std::string path = absl::GetFlag(FLAGS_port_file); port <= 0 && !path.empty()) {
    auto written = cohort::ReadPortFile(path);
    if (!written.ok() || !written->has_value()) {
      std::cerr << "healthcheck: no port in " << path << " yet (the role is starting)\n";
      return 1;
    }
    port = **written;
  }
  if (port <= 0) {
    std::cerr << "healthcheck: error: give --port or --port_file (the role's metrics port)\n";
    return 2;
  }
  cohort::HttpEndpoint role{absl::GetFlag(FLAGS_host), port};
  auto answer = cohort::HttpGet(role, cohort::kHealthPath);
  if (!answer.ok()) {
    // A TLS job's roles serve HTTPS only. As Kubernetes probes do, the certificate is not
    // checked: the answer says only whether the process is up.
    role.https_unverified = true;
    if (auto https = cohort::HttpGet(role, cohort::kHealthPath); https.ok()) answer = https;
  }
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
