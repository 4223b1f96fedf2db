// The straggler is the worker with the most compute a step; its notice says by how much it
// holds the others up, and only past the share.

#include "services/scheduler/straggler.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

WorkerPace Pace(int rank, int64_t step, double step_seconds, double comm) {
  WorkerPace w{rank, absl::StrCat("host-", rank), {}};
  w.progress.step = step;
  w.progress.step_seconds = step_seconds;
  w.progress.communication_overhead = comm;
  return w;
}

TEST(StragglerTest, TheWorkerWithTheMostComputeIsTheStraggler) {
  const std::vector<WorkerPace> workers = {Pace(0, 100, 0.25, 0.6), Pace(1, 100, 0.25, 0.5),
                                           Pace(3, 97, 0.25, 0.0)};
  const std::optional<Straggler> s = SlowestWorker(workers);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 3);
  EXPECT_EQ(s->host, "host-3");
  EXPECT_NEAR(s->compute_seconds, 0.25, 1e-12);
  EXPECT_EQ(s->fastest_rank, 0);
  EXPECT_NEAR(s->lag_seconds, 0.15, 1e-12);
  EXPECT_EQ(s->lag_steps, 3);
}

TEST(StragglerTest, NoneAmongEvenWorkersOrOne) {
  EXPECT_FALSE(SlowestWorker({}).has_value());
  EXPECT_FALSE(SlowestWorker({Pace(0, 5, 0.2, 0.1)}).has_value());
  EXPECT_FALSE(SlowestWorker({Pace(0, 5, 0.2, 0.5), Pace(1, 5, 0.2, 0.5)}).has_value());
}

TEST(StragglerTest, TheNoticeComesOnlyPastTheShareAndSaysWhatTheModeCosts) {
  const Straggler s{2, "host-2", 0.25, 0, 0.15, 2};  // 150% more than the fastest's 0.10 s
  const std::optional<std::string> sync = StragglerNotice(s, 0.2, 0.005, KVStoreMode::kDistSync);
  ASSERT_TRUE(sync.has_value());
  EXPECT_TRUE(absl::StrContains(*sync, "worker 2 (host host-2) is the slowest: 0.250 s of "
                                       "compute a step, 0.150 s (150%) more than worker 0, which "
                                       "every other worker waits for"))
      << *sync;
  const std::optional<std::string> async = StragglerNotice(s, 0.2, 0.005, KVStoreMode::kDistAsync);
  ASSERT_TRUE(async.has_value());
  EXPECT_TRUE(absl::StrContains(*async, "2 steps behind the furthest (dist_async)")) << *async;
  EXPECT_FALSE(StragglerNotice(s, 1.5, 0.005, KVStoreMode::kDistSync).has_value());
}

TEST(StragglerTest, AFewMillisecondsAreTheHostsNoiseNotAStraggler) {
  const Straggler s{1, "host-1", 0.005, 0, 0.001, 0};  // 25% more than 4 ms: 1 ms a step
  EXPECT_FALSE(StragglerNotice(s, 0.2, 0.005, KVStoreMode::kDistSync).has_value());
  EXPECT_TRUE(StragglerNotice(s, 0.2, 0.0005, KVStoreMode::kDistSync).has_value());
}

}  // namespace
}  // namespace cohort
