#ifndef COHORT_SERVICES_COMMON_METRICS_H_
#define COHORT_SERVICES_COMMON_METRICS_H_

#include <memory>
#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"
#include "services/common/http_server.h"

namespace cohort {

// One process's Prometheus metrics: a registry whose series all carry the labels job, role,
// rank and host (metric names: prefix cohort_, units in the name, counters end in _total;
// never a per-key label). Families are registered with .Labels(labels()); the helpers below
// register a family of one series and return it.
class ProcessMetrics {
 public:
  // rank: the member's rank (the scheduler: 0).
  ProcessMetrics(std::string job, std::string role, int rank);

  prometheus::Counter& Counter(const std::string& name, const std::string& help);
  prometheus::Gauge& Gauge(const std::string& name, const std::string& help);
  prometheus::Histogram& Histogram(const std::string& name, const std::string& help,
                                   const prometheus::Histogram::BucketBoundaries& buckets);

  prometheus::Registry& registry() { return *registry_; }
  const prometheus::Labels& labels() const { return labels_; }
  // GET /metrics: the registry in Prometheus's text format.
  HttpServer::Route Route() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Labels labels_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_METRICS_H_
