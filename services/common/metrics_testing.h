#ifndef COHORT_SERVICES_COMMON_METRICS_TESTING_H_
#define COHORT_SERVICES_COMMON_METRICS_TESTING_H_

#include <map>
#include <optional>
#include <string>

#include "prometheus/client_metric.h"
#include "services/common/metrics.h"

namespace cohort {

// For tests: the series of family `name` whose labels include `labels` (as a scrape would see
// it); nullopt when there is none.
std::optional<prometheus::ClientMetric> FindSeries(
    ProcessMetrics& process, const std::string& name,
    const std::map<std::string, std::string>& labels = {});

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_METRICS_TESTING_H_
