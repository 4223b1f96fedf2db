#include "services/common/metrics.h"

#include "prometheus/text_serializer.h"
#include "services/common/grpc_util.h"
#include "services/common/port_file.h"

namespace cohort {

ProcessMetrics::ProcessMetrics(std::string job, std::string role, int rank)
    : registry_(std::make_shared<prometheus::Registry>()),
      labels_{{"job", std::move(job)},
              {"role", std::move(role)},
              {"rank", std::to_string(rank)},
              {"host", HostName()}} {}

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
  return {"/metrics", [registry, refresh] {
            if (refresh) refresh();
            return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                                prometheus::TextSerializer().Serialize(registry->Collect())};
          }};
}

absl::StatusOr<std::unique_ptr<HttpServer>> ServeMetrics(const std::string& bind, int port,
                                                         const std::string& port_file,
                                                         std::vector<HttpServer::Route> routes) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(bind, port, std::move(routes));
  if (!server.ok() || port_file.empty()) return server;
  if (absl::Status s = WritePortFile(port_file, (*server)->port()); !s.ok()) return s;
  return server;
}

}  // namespace cohort
