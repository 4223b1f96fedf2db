#include "services/membership/host_meetings.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "services/membership/job_membership.h"

namespace cohort {
namespace {

std::string PlaceFor(absl::string_view test) {
  return absl::StrCat("cohort-test/", getpid(), "/", test);
}

// A barrier's result once it comes.
class Result {
 public:
  HostMeetings::Done Callback() {
    return [this](absl::StatusOr<uint64_t> r) {
      absl::MutexLock lock(&mu_);
      result_ = std::move(r);
      done_ = true;
    };
  }
  absl::StatusOr<uint64_t> Await() {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Seconds(10)));
    done_ = false;
    return result_;
  }
  bool ready() {
    absl::MutexLock lock(&mu_);
    return done_;
  }

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<uint64_t> result_ ABSL_GUARDED_BY(mu_);
};

// The leader's side: the arrivals it forwards, answered with `answer`.
struct Forwarded {
  absl::Mutex mu;
  std::vector<HostMeetings::Arrival> arrivals ABSL_GUARDED_BY(mu);
  int calls ABSL_GUARDED_BY(mu) = 0;
};

HostMeetings::Forward Answer(Forwarded* seen, absl::StatusOr<uint64_t> answer) {
  return [seen, answer](std::vector<HostMeetings::Arrival> others, HostMeetings::Done release) {
    {
      absl::MutexLock lock(&seen->mu);
      seen->arrivals = std::move(others);
      ++seen->calls;
    }
    release(answer);
  };
}

TEST(HostMeetingsTest, TheLeaderArrivesOnceForEveryWorkerOfItsPlaceBarrierAfterBarrier) {
  // Two meeting points, as two processes of one host hold them.
  auto a = HostMeetings::Create();
  auto b = HostMeetings::Create();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string place = PlaceFor("rounds");
  for (int round = 0; round < 3; ++round) {
    const std::string name = absl::StrCat("barrier ", round);
    Result r1, r2, r3, leader;
    (*a)->Join(place, {1, name, 7}, r1.Callback());
    (*b)->Join(place, {2, name, 7}, r2.Callback());
    Forwarded seen;
    (*a)->Lead(place, 3, leader.Callback(), Answer(&seen, 100 + round));
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_FALSE(leader.ready()) << "released before worker 3 came";
    EXPECT_FALSE(r1.ready());
    (*b)->Join(place, {3, name, 9}, r3.Callback());
    for (Result* r : {&leader, &r1, &r2, &r3}) {
      const absl::StatusOr<uint64_t> got = r->Await();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, 100u + round);
    }
    absl::MutexLock lock(&seen.mu);
    EXPECT_EQ(seen.calls, 1);
    ASSERT_EQ(seen.arrivals.size(), 3u);
    std::vector<int> ranks;
    for (const HostMeetings::Arrival& arrival : seen.arrivals) {
      ranks.push_back(arrival.rank);
      EXPECT_EQ(arrival.name, name);
      EXPECT_EQ(arrival.fingerprint, arrival.rank == 3 ? 9u : 7u);
    }
    std::sort(ranks.begin(), ranks.end());
    EXPECT_EQ(ranks, (std::vector<int>{1, 2, 3}));
  }
}

TEST(HostMeetingsTest, WorkersThatComeBeforeTheirLeaderOpensThePlaceWaitForIt) {
  auto a = HostMeetings::Create();
  auto b = HostMeetings::Create();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string place = PlaceFor("early");
  Result early, leader;
  (*b)->Join(place, {5, "start", 0}, early.Callback());
  absl::SleepFor(absl::Milliseconds(30));
  Forwarded seen;
  (*a)->Lead(place, 1, leader.Callback(), Answer(&seen, 11));
  EXPECT_EQ(*leader.Await(), 11u);
  EXPECT_EQ(*early.Await(), 11u);
}

TEST(HostMeetingsTest, TheSchedulersRefusalReachesEveryWorkerWithItsGeneration) {
  auto a = HostMeetings::Create();
  auto b = HostMeetings::Create();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string place = PlaceFor("refused");
  Result visitor, leader;
  (*b)->Join(place, {1, "x", 0}, visitor.Callback());
  Forwarded seen;
  (*a)->Lead(place, 1, leader.Callback(),
             Answer(&seen, MembershipChangedError(6, "worker 3 died")));
  for (Result* r : {&leader, &visitor}) {
    const absl::StatusOr<uint64_t> got = r->Await();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kAborted);
    EXPECT_EQ(ChangedGeneration(got.status()), 6);
    EXPECT_NE(got.status().message().find("worker 3 died"), std::string::npos);
  }
}

TEST(HostMeetingsTest, ClosingAPlaceReleasesEveryoneWaitingThereAndLaterComers) {
  auto a = HostMeetings::Create();
  auto b = HostMeetings::Create();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string place = PlaceFor("closed");
  Result visitor, leader, never_open;
  Forwarded seen;
  // Worker 2 never comes (it died): the leader and worker 1 wait until the place closes.
  (*b)->Join(place, {1, "x", 0}, visitor.Callback());
  (*a)->Lead(place, 2, leader.Callback(), Answer(&seen, 1));
  (*b)->Join(PlaceFor("never opened"), {1, "x", 0}, never_open.Callback());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(leader.ready());
  EXPECT_FALSE(visitor.ready());
  const absl::Status moved_on = MembershipChangedError(4, "worker 2 died");
  (*a)->Close(place, moved_on);
  (*b)->Close(place, moved_on);
  (*b)->Close(PlaceFor("never opened"), moved_on);
  for (Result* r : {&leader, &visitor, &never_open}) {
    EXPECT_EQ(ChangedGeneration(r->Await().status()), 4);
  }
  Result late;
  (*b)->Join(place, {1, "y", 0}, late.Callback());
  EXPECT_EQ(ChangedGeneration(late.Await().status()), 4);
  absl::MutexLock lock(&seen.mu);
  EXPECT_EQ(seen.calls, 0);
}

TEST(HostMeetingsTest, TheArrivalOfAWorkerThatDiedIsNotCounted) {
  auto a = HostMeetings::Create();
  ASSERT_TRUE(a.ok());
  const std::string place = PlaceFor("died");
  Result leader;
  Forwarded seen;
  (*a)->Lead(place, 2, leader.Callback(), Answer(&seen, 3));
  {
    auto dying = HostMeetings::Create();
    ASSERT_TRUE(dying.ok());
    Result lost;
    (*dying)->Join(place, {1, "x", 0}, lost.Callback());
    absl::SleepFor(absl::Milliseconds(30));
  }  // its process ends, its connection with it
  absl::SleepFor(absl::Milliseconds(30));
  Result r2, r3;
  (*a)->Join(place, {2, "x", 0}, r2.Callback());
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_FALSE(leader.ready()) << "a dead worker's arrival was counted";
  (*a)->Join(place, {3, "x", 0}, r3.Callback());
  for (Result* r : {&leader, &r2, &r3}) EXPECT_EQ(*r->Await(), 3u);
  absl::MutexLock lock(&seen.mu);
  ASSERT_EQ(seen.arrivals.size(), 2u);
  EXPECT_NE(seen.arrivals[0].rank, 1);
  EXPECT_NE(seen.arrivals[1].rank, 1);
}

}  // namespace
}  // namespace cohort
