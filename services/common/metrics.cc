#include "services/common/metrics.h"

#include <algorithm>

#include "prometheus/text_serializer.h"
#include "services/common/addresses.h"
#include "services/common/port_file.h"

namespace cohort {

namespace {

// cohort_refused_requests_total{reason}, read from the security's counts at scrape time.
prometheus::MetricFamily RefusalFamily(const TransportSecurity& security,
                                       const prometheus::Labels& labels) {
  prometheus::MetricFamily family;
  family.name = "cohort_refused_requests_total";
  family.help = "Calls and HTTP requests this process refused (certificate, token), by reason.";
  family.type = prometheus::MetricType::Counter;
  for (const auto& [reason, count] : security.refusals()) {
    prometheus::ClientMetric metric;
    for (const auto& [name, value] : labels) metric.label.push_back({name, value});
    metric.label.push_back({"reason", std::string(RefusalName(reason))});
    metric.counter.value = static_cast<double>(count);
    family.metric.push_back(std::move(metric));
  }
  return family;
}

// cohort_refused_connections_total{reason, peer}: connections a gRPC port closed before any
// handshake (ConnectionGate), by the peer's address.
prometheus::MetricFamily RefusedConnectionFamily(const TransportSecurity& security,
                                                 const prometheus::Labels& labels) {
  prometheus::MetricFamily family;
  family.name = "cohort_refused_connections_total";
  family.help = "Connections a gRPC port of this process closed before any handshake (plaintext "
                "on a TLS port, TLS on a plaintext one, not gRPC, silent, too many waiting), by "
                "reason and peer address.";
  family.type = prometheus::MetricType::Counter;
  for (const TransportSecurity::RefusedConnections& refused : security.refused_connections()) {
    prometheus::ClientMetric metric;
    for (const auto& [name, value] : labels) metric.label.push_back({name, value});
    metric.label.push_back({"peer", refused.peer});
    metric.label.push_back({"reason", std::string(ConnectionRefusalName(refused.reason))});
    metric.counter.value = static_cast<double>(refused.count);
    family.metric.push_back(std::move(metric));
  }
  return family;
}

}  // namespace

ProcessMetrics::ProcessMetrics(std::string job, std::string role, int rank,
                               std::shared_ptr<const TransportSecurity> security)
    : registry_(std::make_shared<prometheus::Registry>()),
      labels_{{"job", std::move(job)},
              {"role", std::move(role)},
              {"rank", std::to_string(rank)},
              {"host", HostName()}},
      security_(std::move(security)) {}

prometheus::Counter& ProcessMetrics::Counter(const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Labels(labels_).Register(*registry_).Add(
      {});
}

prometheus::Gauge& ProcessMetrics::Gauge(const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Labels(labels_).Register(*registry_).Add(
      {});
}

prometheus::Histogram& ProcessMetrics::Histogram(
    const std::string& name, const std::string& help,
    const prometheus::Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram()
      .Name(name)
      .Help(help)
      .Labels(labels_)
      .Register(*registry_)
      .Add({}, buckets);
}

prometheus::Family<prometheus::Counter>& ProcessMetrics::CounterFamily(const std::string& name,
                                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Labels(labels_).Register(*registry_);
}

prometheus::Family<prometheus::Gauge>& ProcessMetrics::GaugeFamily(const std::string& name,
                                                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Labels(labels_).Register(*registry_);
}

HttpServer::Route ProcessMetrics::Route(std::function<void()> refresh) const {
  std::shared_ptr<prometheus::Registry> registry = registry_;
  std::shared_ptr<const TransportSecurity> security = security_;
  prometheus::Labels labels = labels_;
  return {"/metrics", [registry, security, labels, refresh] {
            if (refresh) refresh();
            std::vector<prometheus::MetricFamily> families = registry->Collect();
            families.push_back(RefusalFamily(*security, labels));
            families.push_back(RefusedConnectionFamily(*security, labels));
            return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                                prometheus::TextSerializer().Serialize(families)};
          }};
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(
    const std::string& bind, int port, const std::string& port_file,
    std::vector<HttpServer::Route> routes, std::shared_ptr<const TransportSecurity> security) {
  routes.push_back(
      {kHealthPath, [] { return HttpResponse{200, "text/plain", "ok\n"}; }, /*open=*/true});
  std::vector<std::string> open_paths;
  for (const HttpServer::Route& route : routes) {
    if (route.open) open_paths.push_back(route.path);
  }
  HttpServerOptions options;
  options.bind = bind;
  options.port = port;
  options.certificate_pem = security->certificate_pem();  // with TLS, HTTPS only
  options.key_pem = security->key_pem();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      options, std::move(routes),
      [security, open_paths](absl::string_view authorization, absl::string_view peer,
                             absl::string_view path) {
        return std::find(open_paths.begin(), open_paths.end(), path) != open_paths.end() ||
               security->AdmitHttp(authorization, peer, path);
      });
  if (!server.ok() || port_file.empty()) return server;
  if (absl::Status s = WritePortFile(port_file, (*server)->port()); !s.ok()) return s;
  return server;
}

}  // namespace cohort
