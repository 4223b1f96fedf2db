// Who leads and backs up each share as shards die and come back: the ring on other hosts at the
// start, a dead leader's shares to their backups, a refusal (nothing moved) where the only copy
// died, a shard that came back backing up what has no backup, and the journal's round trip.

#include "services/scheduler/share_placement.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string Name(int shard) { return absl::StrCat("shard ", shard); }

// Shards 0 and 1 share a host: each share's backup is the next shard round the ring on another.
SharePlacement ThreeShards() {
  SharePlacement placement;
  placement.Place({"10.0.0.1:7000", "10.0.0.1:7001", "10.0.0.2:7000"}, /*replicas=*/2);
  return placement;
}

TEST(SharePlacementTest, EachShareIsLedByItsShardAndBackedUpOnAnotherHost) {
  const SharePlacement placement = ThreeShards();
  ASSERT_TRUE(placement.placed());
  EXPECT_EQ(placement.leaders(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(placement.backups(), (std::vector<int>{2, 2, 0}));
  SharePlacement unreplicated;
  unreplicated.Place({"10.0.0.1:7000", "10.0.0.2:7000"}, /*replicas=*/1);
  EXPECT_FALSE(unreplicated.placed());
  EXPECT_EQ(unreplicated.LeaderOf(1), 1);
}

TEST(SharePlacementTest, ADeadLeadersSharesGoToTheirBackups) {
  SharePlacement placement = ThreeShards();
  const absl::StatusOr<std::string> moved = placement.HandOver(2, Name);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, "shard 0 leads share 2 from now on (no roll back); 2 shares it backed up go "
                    "on without a backup until a shard comes back");
  EXPECT_EQ(placement.leaders(), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(placement.backups(), (std::vector<int>{-1, -1, -1}));
  // Shard 2 comes back: it backs up every share, copying them; until it holds a copy, that
  // share's leader may not die.
  EXPECT_EQ(placement.BackUpUnbacked(2),
            (std::vector<std::string>{"0 (led by shard 0)", "1 (led by shard 1)",
                                      "2 (led by shard 0)"}));
  EXPECT_TRUE(placement.CopyHeld(2, 0));
  EXPECT_FALSE(placement.CopyHeld(2, 0));  // said once
  EXPECT_FALSE(placement.CopyHeld(1, 2));  // not its backup
  const absl::StatusOr<std::string> refused = placement.HandOver(0, Name);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "share 2 it led was still being copied to its new backup, "
                                "shard 2"))
      << refused.status();
  EXPECT_EQ(placement.leaders(), (std::vector<int>{0, 1, 0}));  // nothing moved
  EXPECT_TRUE(placement.CopyHeld(2, 2));
  ASSERT_TRUE(placement.HandOver(0, Name).ok());
  EXPECT_EQ(placement.leaders(), (std::vector<int>{2, 1, 2}));
}

TEST(SharePlacementTest, ALeaderWhoseBackupDiedFirstTakesTheOnlyCopyWithIt) {
  SharePlacement placement = ThreeShards();
  ASSERT_TRUE(placement.HandOver(0, Name).ok());  // share 0 to shard 2; share 2 unbacked
  const absl::StatusOr<std::string> refused = placement.HandOver(2, Name);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "had no backup left"))
      << refused.status();
}

TEST(SharePlacementTest, TheJournalKeepsThePlacement) {
  SharePlacement placement = ThreeShards();
  ASSERT_TRUE(placement.HandOver(1, Name).ok());
  placement.BackUpUnbacked(1);
  const JournalShares journal = placement.ToJournal({});
  SharePlacement restored;
  restored.Restore(journal);
  EXPECT_EQ(restored.leaders(), placement.leaders());
  EXPECT_EQ(restored.backups(), placement.backups());
  EXPECT_EQ(restored.ToJournal({}).copied, journal.copied);
}

}  // namespace
}  // namespace cohort
