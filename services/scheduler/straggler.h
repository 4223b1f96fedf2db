#ifndef COHORT_SERVICES_SCHEDULER_STRAGGLER_H_
#define COHORT_SERVICES_SCHEDULER_STRAGGLER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/types/span.h"
#include "trainer/kvstore/kvstore_mode.h"

namespace cohort {

// A worker's latest measurement window, sent with its heartbeats.
struct WorkerProgress {
  int64_t step = 0;
  int64_t epoch = 0;
  double images_per_second = 0;
  double step_seconds = 0;
  double communication_overhead = 0;  // 0..1
  double loss = 0;
  int64_t total_steps = 0;               // 0: unknown
  std::optional<double> test_top1;       // percent, the latest evaluation
};

// The worker the others wait for: in dist_sync the one with the most compute a step (its
// step time less its time in the kvstore), which every other worker waits for at every step;
// lag_seconds is how much more that is than the fastest worker's. lag_steps: how many steps it
// is behind the furthest worker (what dist_async lets grow).
struct Straggler {
  int rank = -1;
  std::string host;
  double compute_seconds = 0;  // a step's
  int fastest_rank = -1;
  double lag_seconds = 0;
  int64_t lag_steps = 0;
};

// An alive worker's latest progress, as the scheduler heard it.
struct WorkerPace {
  int rank = 0;
  std::string host;
  WorkerProgress progress;
};

// The slowest of the workers, with its lag; none with fewer than two or when they are even.
std::optional<Straggler> SlowestWorker(absl::Span<const WorkerPace> workers);

// The notice naming the straggler, when it holds the others up by more than `share` of the
// fastest worker's compute and by at least min_lag_seconds a step (below that, on a shared
// host, the lag is the noise of the machine's other work); none otherwise.
std::optional<std::string> StragglerNotice(const Straggler& s, double share,
                                           double min_lag_seconds, KVStoreMode mode);

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_STRAGGLER_H_
