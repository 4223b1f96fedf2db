#include "services/common/metrics_testing.h"

#include <algorithm>

namespace cohort {

std::optional<prometheus::ClientMetric> FindSeries(
    ProcessMetrics& process, const std::string& name,
    const std::map<std::string, std::string>& labels) {
  for (const auto& family : process.registry().Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& series : family.metric) {
      const bool match = std::all_of(labels.begin(), labels.end(), [&](const auto& want) {
        return std::any_of(series.label.begin(), series.label.end(), [&](const auto& l) {
          return l.name == want.first && l.value == want.second;
        });
      });
      if (match) return series;
    }
  }
  return std::nullopt;
}

}  // namespace cohort
