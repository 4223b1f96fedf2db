#include "services/scheduler/straggler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort {

std::optional<Straggler> SlowestWorker(absl::Span<const WorkerPace> workers) {
  const WorkerPace* slowest = nullptr;
  const WorkerPace* fastest = nullptr;
  double most = 0, least = 0;
  int64_t furthest = 0;
  for (const WorkerPace& w : workers) {
    // A step's compute: its time less its time in the kvstore.
    const double c = w.progress.step_seconds * (1 - w.progress.communication_overhead);
    if (slowest == nullptr || c > most) {
      slowest = &w;
      most = c;
    }
    if (fastest == nullptr || c < least) {
      fastest = &w;
      least = c;
    }
    furthest = std::max(furthest, w.progress.step);
  }
  if (slowest == nullptr || slowest == fastest) return std::nullopt;
  return Straggler{slowest->rank, slowest->host, most,
                   fastest->rank, most - least,  furthest - slowest->progress.step};
}

std::optional<std::string> StragglerNotice(const Straggler& s, double share,
                                           double min_lag_seconds, KVStoreMode mode) {
  const double fastest = s.compute_seconds - s.lag_seconds;
  if (s.lag_seconds <= share * fastest || s.lag_seconds < min_lag_seconds) return std::nullopt;
  return absl::StrFormat(
      "worker %d (host %s) is the slowest: %.3f s of compute a step, %.3f s (%.0f%%) more than "
      "worker %d%s; see docs/reliability.md, stragglers",
      s.rank, s.host, s.compute_seconds, s.lag_seconds,
      fastest > 0 ? 100 * s.lag_seconds / fastest : 100.0, s.fastest_rank,
      mode == KVStoreMode::kDistSync
          ? ", which every other worker waits for at every step (dist_sync)"
          : absl::StrCat(", ", s.lag_steps, " steps behind the furthest (dist_async)"));
}

}  // namespace cohort
