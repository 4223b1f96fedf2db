#include "tools/launch/job_env.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "services/common/cpu_list.h"

namespace cohort::launch {
namespace {

absl::string_view NameOf(absl::string_view entry) { return entry.substr(0, entry.find('=')); }

// OMP_NUM_THREADS as `env` sets it (a number; 0: not set, or not a number).
int UsersThreads(const std::vector<std::string>& env) {
  for (const std::string& entry : env) {
    if (NameOf(entry) != "OMP_NUM_THREADS") continue;
    int threads = 0;
    return absl::SimpleAtoi(absl::string_view(entry).substr(entry.find('=') + 1), &threads) &&
                   threads > 0
               ? threads
               : 0;
  }
  return 0;
}

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
  };
  if (spec.tls_dir.empty()) {
    set["COHORT_INSECURE"] = "1";
  } else {
    set["COHORT_TLS_DIR"] = spec.tls_dir;
    set["COHORT_TOKEN_FILE"] = spec.token_file;
  }
  if (spec.role != Role::kScheduler) {
    set["COHORT_RANK"] = absl::StrCat(spec.rank);
    set["COHORT_SCHEDULER"] = spec.scheduler_address;
  }
  if (!spec.metrics_bind.empty()) set["COHORT_METRICS_BIND"] = spec.metrics_bind;
  if (!spec.metrics_port_file.empty()) set["COHORT_METRICS_PORT_FILE"] = spec.metrics_port_file;
  std::map<std::string, std::string> defaults;
  if (spec.role != Role::kWorker) {
    defaults["OMP_NUM_THREADS"] = "1";
  } else if (const int threads = UsersThreads(base); threads > 0) {
    // More compute threads than cores (or cores unknown): OpenMP threads that spin while they
    // wait would take the cores from the threads doing work.
    if (spec.cpus.empty() || threads * spec.num_workers > static_cast<int>(spec.cpus.size())) {
      defaults["OMP_WAIT_POLICY"] = "passive";
    }
  } else if (!spec.cpus.empty()) {
    // Threads that fit the cores keep OpenMP's own policy (spin briefly, then sleep): sleeping
    // at once between parallel regions makes every region wait for its threads to wake.
    const int workers = std::max(1, spec.num_workers);
    const int threads = std::max(1, static_cast<int>(spec.cpus.size()) / workers);
    defaults["OMP_NUM_THREADS"] = absl::StrCat(threads);
    // Each worker's threads on cores of their own (where there is a core for every worker): no
    // worker's team waits on a core another one's holds.
    if (workers <= static_cast<int>(spec.cpus.size())) {
      const auto slice = absl::MakeConstSpan(spec.cpus).subspan(
          static_cast<size_t>((spec.rank % workers) * threads), static_cast<size_t>(threads));
      defaults["COHORT_CPUS"] = FormatCpuList(slice);
    }
  }

  std::vector<std::string> env;
  for (const std::string& entry : base) {
    const std::string name(NameOf(entry));
    // The job's own security settings replace any inherited ones, whichever they are.
    if (set.count(name) > 0 || name == "COHORT_INSECURE" || name == "COHORT_TLS_DIR" ||
        name == "COHORT_TOKEN_FILE") {
      continue;
    }
    defaults.erase(name);  // the user's choice wins
    env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(absl::StrCat(name, "=", value));
  for (const auto& [name, value] : defaults) env.push_back(absl::StrCat(name, "=", value));
  return env;
}

std::vector<std::string> RemoteEnvironment(const std::vector<std::string>& env,
                                           const std::vector<std::string>& forwarded) {
  std::vector<std::string> out;
  for (const std::string& entry : env) {
    const absl::string_view name = NameOf(entry);
    if (absl::StartsWith(name, "COHORT_") || absl::StartsWith(name, "OMP_") ||
        std::find(forwarded.begin(), forwarded.end(), name) != forwarded.end()) {
      out.push_back(entry);
    }
  }
  return out;
}

}  // namespace cohort::launch
