// A round of a barrier: released together once every worker arrived, with what each brought
// in rank order; a wrong name, another partition map or too many bytes refused, saying why; an
// abandoned round lets its waiters go with the reason and the next arrival opens a new one.

#include "services/scheduler/barrier_round.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(BarrierRoundTest, EveryWorkerArrivesThenAllPassWithWhatEachBrought) {
  BarrierRound round;
  std::vector<absl::StatusOr<BarrierPassed>> got(2, absl::UnknownError("none"));
  round.Count(1);
  round.OpenIfIdle("init", 2, kStart);
  ASSERT_TRUE(round.Arrive(1, "init", 0xabc, "worker 1").ok());
  ASSERT_TRUE(round.Bring(1, "one", "worker 1").ok());
  round.Wait([&](absl::StatusOr<BarrierPassed> p) { got[1] = std::move(p); });
  EXPECT_FALSE(round.ReleaseIfComplete(2, kStart + absl::Milliseconds(5)));
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kUnknown);  // still waiting
  round.Count(1);
  round.OpenIfIdle("other", 2, kStart + absl::Seconds(9));  // one is in progress: no change
  ASSERT_TRUE(round.Arrive(0, "init", 0xabc, "worker 0").ok());
  ASSERT_TRUE(round.Bring(0, "zero", "worker 0").ok());
  round.Wait([&](absl::StatusOr<BarrierPassed> p) { got[0] = std::move(p); });
  EXPECT_TRUE(round.ReleaseIfComplete(2, kStart + absl::Milliseconds(30)));
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->fingerprint, 0xabcu);
    EXPECT_EQ(*g->payloads, (std::vector<std::string>{"zero", "one"}));
  }
  EXPECT_EQ(round.TakeWaits(), std::vector<absl::Duration>{absl::Milliseconds(30)});
  EXPECT_TRUE(round.TakeWaits().empty());
  EXPECT_EQ(round.calls(), 2);
  EXPECT_EQ(round.arrivals(), 2);
}

TEST(BarrierRoundTest, AnotherBarrierAnotherPartitionMapOrTooManyBytesAreRefused) {
  BarrierRound round;
  round.OpenIfIdle("init", 3, kStart);
  ASSERT_TRUE(round.Arrive(0, "init", 0x1, "worker 0").ok());
  const absl::Status elsewhere = round.Arrive(1, "step", 0x1, "worker 1");
  EXPECT_TRUE(absl::StrContains(elsewhere.message(), "worker 1 reached barrier 'step' while "
                                                     "the others wait at 'init'"))
      << elsewhere;
  const absl::Status other_map = round.Arrive(2, "init", 0x2, "worker 2");
  EXPECT_TRUE(absl::StrContains(other_map.message(), "worker 2 computed partition map "
                                                     "0000000000000002, but worker 0 computed "
                                                     "0000000000000001"))
      << other_map;
  const absl::Status huge =
      round.Bring(0, std::string(BarrierRound::kMaxExchangeBytes + 1, 'x'), "worker 0");
  EXPECT_EQ(huge.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(huge.message(), "send parameters and gradients through the "
                                                "kvstore"))
      << huge;
}

TEST(BarrierRoundTest, AnAbandonedRoundLetsItsWaitersGoAndTheNextArrivalOpensANewOne) {
  BarrierRound round;
  absl::StatusOr<BarrierPassed> got = absl::UnknownError("none");
  round.OpenIfIdle("init", 2, kStart);
  ASSERT_TRUE(round.Arrive(0, "init", 0, "worker 0").ok());
  round.Wait([&](absl::StatusOr<BarrierPassed> p) { got = std::move(p); });
  round.Abandon(absl::AbortedError("the workers changed"));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kAborted);
  round.OpenIfIdle("regroup", 1, kStart + absl::Seconds(1));
  ASSERT_TRUE(round.Arrive(0, "regroup", 0, "worker 0").ok());
  EXPECT_TRUE(round.ReleaseIfComplete(1, kStart + absl::Seconds(2)));
}

}  // namespace
}  // namespace cohort
