#include "tools/launch/job_env.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace cohort::launch {
namespace {

absl::string_view NameOf(absl::string_view entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kScheduler:
      return "scheduler";
    case Role::kShard:
      return "shard";
    case Role::kWorker:
      return "worker";
  }
  return "?";
}

std::vector<std::string> JobEnvironment(const std::vector<std::string>& base,
                                        const JobEnvSpec& spec) {
  std::map<std::string, std::string> set = {
      {"COHORT_JOB_ID", spec.job_id},
      {"COHORT_ROLE", RoleName(spec.role)},
      {"COHORT_NUM_WORKERS", absl::StrCat(spec.num_workers)},
      {"COHORT_NUM_SHARDS", absl::StrCat(spec.num_shards)},
      {"COHORT_MODE", spec.mode},
      // A job on this machine's loopback: plaintext (Contracts, "Names shared").
      {"COHORT_INSECURE", "1"},
  };
  if (spec.role != Role::kScheduler) {
    set["COHORT_RANK"] = absl::StrCat(spec.rank);
    set["COHORT_SCHEDULER"] = spec.scheduler_address;
  }
  if (!spec.metrics_bind.empty()) set["COHORT_METRICS_BIND"] = spec.metrics_bind;
  if (!spec.metrics_port_file.empty()) set["COHORT_METRICS_PORT_FILE"] = spec.metrics_port_file;
  std::map<std::string, std::string> defaults = {
      {"OMP_WAIT_POLICY", "passive"},
      {"OMP_NUM_THREADS", absl::StrCat(spec.role == Role::kWorker
                                           ? std::max(1, spec.cores / std::max(1, spec.num_workers))
                                           : 1)},
  };

  std::vector<std::string> env;
  for (const std::string& entry : base) {
    const std::string name(NameOf(entry));
    if (set.count(name) > 0) continue;
    defaults.erase(name);  // the user's choice wins
    env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(absl::StrCat(name, "=", value));
  for (const auto& [name, value] : defaults) env.push_back(absl::StrCat(name, "=", value));
  return env;
}

}  // namespace cohort::launch
