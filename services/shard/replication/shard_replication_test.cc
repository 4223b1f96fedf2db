// A shard's part in replicated shards without a stream: what it leads goes to its backup's
// link, a copy for a shard that came back is counted and configures it, streams end when it
// leaves, and what a shard without a way to reach a backup cannot do is refused, saying so.
// (backup_link_test.cc runs the same over real streams.)

#include "services/shard/replication/shard_replication.h"

#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "services/shard/shard_core_testing.h"
#include "services/wire/config_proto.h"

namespace cohort {
namespace {

constexpr PartId kLed{0, 0}, kOther{1, 0};

// A link whose backup holds each update at once: the updates it was given, their dones run on
// a thread of its own (never inside Forward).
class HoldingLink final : public BackupLink {
 public:
  ~HoldingLink() override {
    for (std::thread& t : acks_) t.join();
  }
  void Forward(const LeaderUpdate& update, std::function<void()> done) override {
    absl::MutexLock lock(&mu_);
    forwarded_.push_back({update.id, update.version, update.copy != nullptr});
    acks_.emplace_back(std::move(done));
  }
  bool broken() const override { return false; }

  struct Forwarded {
    PartId id;
    int64_t version;
    bool copy;
  };
  std::vector<Forwarded> forwarded() const {
    absl::MutexLock lock(&mu_);
    return forwarded_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Forwarded> forwarded_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> acks_ ABSL_GUARDED_BY(mu_);
};

// A leading shard with parts kLed (its own share, 0) and kOther (share 1, backed up here), its
// links made as HoldingLinks (to the addresses asked for).
class ShardReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(core_.Configure(Config(2, KVStoreMode::kDistSync, /*parts=*/2)).ok());
    ASSERT_TRUE(core_.AddPart(kLed, Gradient(1, 0, 8), 0).ok());
    ASSERT_TRUE(core_.AddPart(kOther, Gradient(2, 0, 8), 1, /*leads=*/false).ok());
    replication_.Holds(0, kLed);
    replication_.Holds(1, kOther);
    set_up_.Done();
  }
  void TearDown() override { replication_.Close(); }

  ShardCore core_{0};
  std::vector<RecordingSink> sinks_ = std::vector<RecordingSink>(2);  // outlive the links
  ShardSetUp set_up_;
  std::vector<std::string> dialled_;
  std::vector<HoldingLink*> links_;
  std::ostringstream log_;
  ShardReplication replication_{&core_, &set_up_,
                                [this](const std::string& address) {
                                  dialled_.push_back(address);
                                  auto link = std::make_unique<HoldingLink>();
                                  links_.push_back(link.get());
                                  return link;
                                },
                                &log_};
};

TEST_F(ShardReplicationTest, TheLedPartsForwardTheirUpdatesToTheBackupNamedAtInit) {
  ASSERT_TRUE(replication_.LinkLedParts("10.0.0.2:7000", {kLed}, 2).ok());
  ASSERT_EQ(dialled_, std::vector<std::string>{"10.0.0.2:7000"});
  EXPECT_TRUE(absl::StrContains(log_.str(), "shard 0: its backup at 10.0.0.2:7000 keeps the 1 "
                                            "part it leads; it backs up 1 part of another shard"))
      << log_.str();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(core_.Push(r, kLed, 0, Gradient(r, 0, 8), &sinks_[r]).ok());
    ASSERT_TRUE(core_.Push(r, kOther, 0, Gradient(r, 0, 8), &sinks_[r]).ok());
  }
  const std::vector<HoldingLink::Forwarded> forwarded = links_[0]->forwarded();
  ASSERT_EQ(forwarded.size(), 1u);  // not the part backed up here
  EXPECT_EQ(forwarded[0].id, kLed);
  EXPECT_EQ(forwarded[0].version, 1);
  EXPECT_FALSE(forwarded[0].copy);
  // No backup named: nothing is linked.
  EXPECT_TRUE(replication_.LinkLedParts("", {kLed}, 2).ok());
  EXPECT_EQ(dialled_.size(), 1u);
}

TEST_F(ShardReplicationTest, AShareIsCopiedWholeToAShardThatCameBack) {
  absl::StatusOr<int> parts = replication_.CopyShareTo(0, 3, "10.0.0.3:7000");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(*parts, 1);
  ASSERT_EQ(dialled_, std::vector<std::string>{"10.0.0.3:7000"});
  const std::vector<HoldingLink::Forwarded> forwarded = links_[0]->forwarded();
  ASSERT_EQ(forwarded.size(), 1u);
  EXPECT_TRUE(forwarded[0].copy);
  EXPECT_EQ(forwarded[0].id, kLed);
  EXPECT_TRUE(absl::StrContains(log_.str(), "shard 0: shard 3 at 10.0.0.3:7000 backs up share 0 "
                                            "(1 part) from now on"))
      << log_.str();
  // A share of which the shard holds nothing.
  const absl::StatusOr<int> none = replication_.CopyShareTo(5, 3, "10.0.0.3:7000");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "shard 0 holds no part of share 5, "
                                                         "which shard 3 at 10.0.0.3:7000 was to "
                                                         "back up"))
      << none.status();
}

// A shard that came back, never initialised: a leader's first copy configures it, and the
// copied parts are counted by share.
TEST(ShardReplicationBackupTest, ACopyConfiguresAShardThatCameBackAndIsCounted) {
  ShardCore core(3);
  ShardSetUp set_up;
  set_up.Done();
  std::ostringstream log;
  ShardReplication replication(&core, &set_up, nullptr, &log);
  ASSERT_TRUE(replication.OpenIntake().ok());
  v1::LeaderUpdateBatch batch;
  *batch.mutable_config() = ToProto(Config(2, KVStoreMode::kDistSync, /*parts=*/2));
  const std::vector<float> value = Gradient(4, 0, 8);
  v1::LeaderUpdate* u = batch.add_updates();
  u->set_key(kLed.key);
  u->set_version(7);
  u->set_copy(true);
  u->set_share(0);
  u->add_pushed_on_by_rank(6);
  u->add_pushed_on_by_rank(6);
  const absl::Span<const char> bytes(reinterpret_cast<const char*>(value.data()),
                                     value.size() * sizeof(float));
  ASSERT_TRUE(replication.TakeUpdates(batch, {bytes}, "shard 0").ok()) << log.str();
  ASSERT_TRUE(core.config().has_value());
  EXPECT_EQ(core.config()->num_workers, 2);
  EXPECT_EQ(replication.PartsOfShare(0), 1);
  EXPECT_EQ(replication.PartsOfShare(1), 0);
  std::vector<float> held;
  EXPECT_EQ(*core.Read(kLed, &held), 7);
  EXPECT_EQ(held, value);
  // Values that are no F32 values are refused, said with the leader's name.
  batch.clear_config();
  u->set_copy(false);
  u->set_version(8);
  const absl::Status refused = replication.TakeUpdates(batch, {bytes.subspan(0, 5)}, "shard 0");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(log.str(), "5 bytes are no F32 values (from shard 0); the "
                                           "leader's parts go on without this backup"))
      << log.str();
}

TEST(ShardReplicationBackupTest, AShardWithoutAWayToReachABackupLeadsNothingBackedUp) {
  ShardCore core(1);
  ShardSetUp set_up;
  set_up.Done();
  std::ostringstream log;
  ShardReplication replication(&core, &set_up, nullptr, &log);
  const absl::Status linked = replication.LinkLedParts("10.0.0.2:7000", {kLed}, 1);
  EXPECT_EQ(linked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(linked.message(), "without a way to reach its backup")) << linked;
  const absl::Status copied = replication.CopyShareTo(1, 2, "10.0.0.3:7000").status();
  EXPECT_EQ(copied.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(copied.message(), "shard 1 was started without a way to reach a "
                                                  "backup; shard 2 at 10.0.0.3:7000 cannot back "
                                                  "it up"))
      << copied;
}

// A leader's stream that comes before the backup is set up waits for it; a backup that leaves
// the job first lets it go at once (a shard that fails while loading exits without waiting).
TEST(ShardReplicationBackupTest, AStreamWaitingForTheSetUpIsLetGoWhenTheShardLeaves) {
  ShardCore backup(1);
  ShardSetUp set_up;
  ShardReplication replication(&backup, &set_up, nullptr, &std::cerr);
  absl::Notification opened;
  absl::Status open;
  std::thread leader([&] {
    open = replication.ServeStream([] {}).status();
    opened.Notify();
  });
  EXPECT_FALSE(opened.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  set_up.Leave();
  EXPECT_TRUE(opened.WaitForNotificationWithTimeout(absl::Seconds(2)));
  leader.join();
  EXPECT_EQ(open.code(), absl::StatusCode::kCancelled) << open;
}

// Closing cancels the streams still served (not those that ended), and refuses later ones.
TEST(ShardReplicationBackupTest, ClosingCancelsTheStreamsServedAndRefusesLaterOnes) {
  ShardCore backup(1);
  ShardSetUp set_up;
  set_up.Done();
  ShardReplication replication(&backup, &set_up, nullptr, &std::cerr);
  int cancelled_open = 0, cancelled_ended = 0;
  auto open = replication.ServeStream([&] { ++cancelled_open; });
  auto ended = replication.ServeStream([&] { ++cancelled_ended; });
  ASSERT_TRUE(open.ok() && ended.ok());
  ended->reset();
  replication.Close();
  EXPECT_EQ(cancelled_open, 1);
  EXPECT_EQ(cancelled_ended, 0);
  EXPECT_EQ(replication.ServeStream([] {}).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(replication.OpenIntake().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace cohort
