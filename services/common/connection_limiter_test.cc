#include "services/common/connection_limiter.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Connection ids: addresses of the elements of an array, as the server uses its connections'.
int c[10];
const absl::Time t0 = absl::FromUnixSeconds(1000);

ConnectionLimits Limits(int all, int per_peer) {
  ConnectionLimits limits;
  limits.max_connections = all;
  limits.max_connections_per_peer = per_peer;
  limits.request_deadline = absl::Seconds(5);
  return limits;
}

TEST(ConnectionLimiterTest, APeerPastItsCapLosesItsLongestWaitingConnection) {
  ConnectionLimiter limiter(Limits(100, 2));
  EXPECT_THAT(limiter.Opened(&c[0], "10.0.0.1", t0), IsEmpty());
  EXPECT_THAT(limiter.Opened(&c[1], "10.0.0.1", t0 + absl::Milliseconds(1)), IsEmpty());
  EXPECT_THAT(limiter.Opened(&c[2], "10.0.0.2", t0 + absl::Milliseconds(2)), IsEmpty());
  // The third from 10.0.0.1 closes its first, not the other peer's.
  EXPECT_THAT(limiter.Opened(&c[3], "10.0.0.1", t0 + absl::Milliseconds(3)), ElementsAre(&c[0]));
  limiter.Closed(&c[0]);
  EXPECT_EQ(limiter.open(), 3);
  // A connection that has asked is not chosen: the one waiting next is.
  limiter.Asked(&c[1]);
  EXPECT_THAT(limiter.Opened(&c[4], "10.0.0.1", t0 + absl::Milliseconds(4)), ElementsAre(&c[3]));
  EXPECT_EQ(limiter.closed_by_limits(), 2);
}

// With a peer grace, a burst of one peer's connections is not cut at its cap while young; one
// that has waited past the grace is closed as before, and the cap of all holds regardless.
TEST(ConnectionLimiterTest, APeersYoungConnectionsOutlastItsCapForTheGrace) {
  ConnectionLimits limits = Limits(4, 2);
  limits.peer_grace = absl::Seconds(1);
  ConnectionLimiter limiter(limits);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(limiter.Opened(&c[i], "10.0.0.1", t0 + absl::Milliseconds(i == 0 ? 0 : 700 + i)),
                IsEmpty());
  }
  EXPECT_EQ(limiter.open(), 3);
  // c[0] alone has waited past the grace: the next one of its peer closes it, and only it.
  EXPECT_THAT(limiter.Opened(&c[3], "10.0.0.1", t0 + absl::Milliseconds(1500)),
              ElementsAre(&c[0]));
  limiter.Closed(&c[0]);
  // Four open (the cap of all): a fifth, of another peer, closes the longest waiting.
  EXPECT_THAT(limiter.Opened(&c[4], "10.0.0.2", t0 + absl::Milliseconds(1501)), IsEmpty());
  EXPECT_THAT(limiter.Opened(&c[5], "10.0.0.2", t0 + absl::Milliseconds(1502)),
              ElementsAre(&c[1]));
}

TEST(ConnectionLimiterTest, AllPastTheCapLoseTheLongestWaitingOfAnyPeer) {
  ConnectionLimiter limiter(Limits(2, 10));
  limiter.Opened(&c[0], "a", t0);
  limiter.Opened(&c[1], "b", t0 + absl::Milliseconds(1));
  // c[0] answered since: it waits for less time than c[1].
  limiter.Asked(&c[0]);
  limiter.Answered(&c[0], t0 + absl::Milliseconds(2));
  EXPECT_THAT(limiter.Opened(&c[2], "c", t0 + absl::Milliseconds(3)), ElementsAre(&c[1]));
}

TEST(ConnectionLimiterTest, TheNewConnectionGoesWhenEveryOtherIsBeingAnswered) {
  ConnectionLimiter limiter(Limits(1, 10));
  limiter.Opened(&c[0], "a", t0);
  limiter.Asked(&c[0]);
  EXPECT_THAT(limiter.Opened(&c[1], "b", t0), ElementsAre(&c[1]));
  limiter.Closed(&c[1]);
  EXPECT_EQ(limiter.open(), 1);
}

TEST(ConnectionLimiterTest, ConnectionsPastTheRequestDeadlineCloseWhenAnotherOpens) {
  ConnectionLimiter limiter(Limits(10, 10));
  limiter.Opened(&c[0], "a", t0);                     // never asks: slowloris
  limiter.Opened(&c[1], "a", t0 + absl::Seconds(1));  // asks and is answered at 4 s
  limiter.Asked(&c[1]);
  limiter.Answered(&c[1], t0 + absl::Seconds(4));
  limiter.Opened(&c[2], "b", t0 + absl::Seconds(2));  // being answered: never late
  limiter.Asked(&c[2]);
  EXPECT_THAT(limiter.Opened(&c[3], "b", t0 + absl::Seconds(6)), ElementsAre(&c[0]));
  EXPECT_THAT(limiter.Opened(&c[4], "b", t0 + absl::Seconds(9) + absl::Milliseconds(1)),
              ElementsAre(&c[1]));
  // Each is listed once, however late it stays until it closes.
  EXPECT_THAT(limiter.Opened(&c[5], "b", t0 + absl::Seconds(12)),
              ElementsAre(&c[3]));
  for (int i : {0, 1, 3}) limiter.Closed(&c[i]);
  EXPECT_EQ(limiter.open(), 3);
}

}  // namespace
}  // namespace cohort
