// Where a part's backup goes: the next shard on another host, round the ring.

#include "services/membership/job_membership.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(ShardsViewTest, ABackupIsTheNextShardOnAnotherHost) {
  ShardsView view;
  view.replicas = 2;
  // Two shards a host on hosts a and b, and one on c.
  view.addresses = {"a:1", "a:2", "b:1", "b:2", "c:1"};
  EXPECT_EQ(view.BackupOf(0), 2);
  EXPECT_EQ(view.BackupOf(1), 2);
  EXPECT_EQ(view.BackupOf(2), 4);
  EXPECT_EQ(view.BackupOf(3), 4);
  EXPECT_EQ(view.BackupOf(4), 0);  // round the ring
  // IPv6 hosts are told apart by host, not port.
  view.addresses = {"[::1]:7000", "[::1]:7001", "[fe80::2]:7000"};
  EXPECT_EQ(view.BackupOf(0), 2);
  EXPECT_EQ(view.BackupOf(2), 0);
}

TEST(ShardsViewTest, OnOneHostTheNextShardBacksUp) {
  ShardsView view;
  view.replicas = 2;
  view.addresses = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
  EXPECT_EQ(view.BackupOf(0), 1);
  EXPECT_EQ(view.BackupOf(2), 0);
}

TEST(ShardsViewTest, NoBackupWithoutReplicasOrWithOneShard) {
  ShardsView view;
  view.addresses = {"a:1", "b:1"};
  EXPECT_EQ(view.BackupOf(0), -1);
  view.replicas = 2;
  view.addresses = {"a:1"};
  EXPECT_EQ(view.BackupOf(0), -1);
}

}  // namespace
}  // namespace cohort
