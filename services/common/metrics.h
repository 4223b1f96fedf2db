#ifndef COHORT_SERVICES_COMMON_METRICS_H_
#define COHORT_SERVICES_COMMON_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"
#include "services/common/http_server.h"
#include "services/common/transport_security.h"

namespace cohort {

// One process's Prometheus metrics: a registry whose series all carry the labels job, role,
// rank and host (metric names: prefix cohort_, units in the name, counters end in _total;
// never a per-key label). Families are registered with .Labels(labels()); the helpers below
// register a family of one series and return it.
class ProcessMetrics {
 public:
  // rank: the member's rank (the scheduler: 0). security: whose refusals /metrics reports as
  // cohort_refused_requests_total{reason} and cohort_refused_connections_total{reason,peer}.
  ProcessMetrics(std::string job, std::string role, int rank,
                 std::shared_ptr<const TransportSecurity> security = TransportSecurity::Plaintext());

  prometheus::Counter& Counter(const std::string& name, const std::string& help);
  prometheus::Gauge& Gauge(const std::string& name, const std::string& help);
  prometheus::Histogram& Histogram(const std::string& name, const std::string& help,
                                   const prometheus::Histogram::BucketBoundaries& buckets);
  // Families whose series differ by a label of their own (a phase, a reason; never a key).
  prometheus::Family<prometheus::Counter>& CounterFamily(const std::string& name,
                                                         const std::string& help);
  prometheus::Family<prometheus::Gauge>& GaugeFamily(const std::string& name,
                                                     const std::string& help);

  prometheus::Registry& registry() { return *registry_; }
  const prometheus::Labels& labels() const { return labels_; }
  // GET /metrics: the registry in Prometheus's text format, after refresh (when given) has set
  // the values computed at scrape time.
  HttpServer::Route Route(std::function<void()> refresh = nullptr) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Labels labels_;
  std::shared_ptr<const TransportSecurity> security_;
};

// Serves routes (/metrics, ...) on bind:port (0: any port) to the requests security admits
// (with a job token, only those that carry it), over HTTPS with this process's certificate
// when security has TLS (plain HTTP only for plaintext jobs), and, when port_file is not empty, writes the port
// it got there (Contracts, "Ports"). Also serves kHealthPath to anyone ("ok": the process is up
// and serving), for container health checks and Kubernetes probes, which carry no token, as it
// does every route marked open.
inline constexpr char kHealthPath[] = "/healthz";
absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(
    const std::string& bind, int port, const std::string& port_file,
    std::vector<HttpServer::Route> routes, std::shared_ptr<const TransportSecurity> security);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_METRICS_H_
