#include "tools/launch/metrics_targets.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace cohort::launch {

std::string FileSdTargets(const std::vector<MetricsTarget>& targets) {
  nlohmann::json groups = nlohmann::json::array();
  for (const MetricsTarget& t : targets) {
    groups.push_back({{"targets", {t.address}},
                      {"labels",
                       {{"job", t.job_id}, {"role", RoleName(t.role)}, {"rank", absl::StrCat(t.rank)}}}});
  }
  return groups.dump(2) + "\n";
}

}  // namespace cohort::launch
