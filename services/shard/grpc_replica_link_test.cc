// A leader's parts replicated to a backup shard over a real Replicate stream (loopback): the
// backup ends bitwise equal to the leader, the workers hear each step once the backup holds
// it, and when the backup's server goes away the leader says so and answers without it.

#include "services/shard/grpc_replica_link.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/common/grpc_util.h"
#include "services/shard/shard_core_testing.h"
#include "services/shard/shard_service.h"
#include "services/shard/share_copier.h"
#include "services/wire/config_proto.h"
#include "services/wire/part_codec.h"

namespace cohort {
namespace {

constexpr PartId kWeights{0, 0};
constexpr PartId kStats{1, 0};

class GrpcReplicaLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardConfig config = Config(2, KVStoreMode::kDistSync, /*parts=*/2);
    config.auxiliary_keys = {kStats.key};
    for (ShardCore* core : {&leader_, &backup_}) {
      ASSERT_TRUE(core->Configure(config).ok());
      ASSERT_TRUE(core->AddPart(kWeights, Gradient(5, 0, 6000)).ok());
      ASSERT_TRUE(core->AddPart(kStats, Gradient(6, 0, 4)).ok());
    }
    auto server = StartServer("127.0.0.1", 0, {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    const std::string address = absl::StrCat("127.0.0.1:", server_.port);
    link_ = std::make_unique<GrpcReplicaLink>(v1::Shard::NewStub(MakeChannel(address)),
                                              "shard 0", absl::StrCat("shard 1 at ", address),
                                              &err_);
    ASSERT_TRUE(leader_.SetBackup(kWeights, link_.get()).ok());
    ASSERT_TRUE(leader_.SetBackup(kStats, link_.get()).ok());
  }
  void TearDown() override {
    link_.reset();
    server_.Shutdown();
  }

  // Both workers push both parts of `step`; true once each has both answers.
  bool Step(int step) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(leader_.Push(r, kWeights, step, Gradient(r, step, 6000), &sinks_[r]).ok());
      EXPECT_TRUE(leader_.Push(r, kStats, step, Gradient(r + 2, step, 4), &sinks_[r]).ok());
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      bool all = true;
      for (RecordingSink& s : sinks_) {
        absl::MutexLock lock(&s.mu_);
        all = all && s.versions.size() == 2u * (step + 1);
      }
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  }

  std::pair<std::vector<float>, int64_t> Held(ShardCore* core, PartId id) {
    std::vector<float> value;
    const int64_t version = *core->Read(id, &value);
    return {value, version};
  }

  ShardCore leader_{0};
  ShardCore backup_{1};
  ShardService service_{&backup_};
  RunningServer server_;
  std::ostringstream err_;
  std::unique_ptr<GrpcReplicaLink> link_;
  std::vector<RecordingSink> sinks_ = std::vector<RecordingSink>(2);
};

TEST_F(GrpcReplicaLinkTest, TheBackupTakesEveryStepBitwise) {
  for (int step = 0; step < 5; ++step) ASSERT_TRUE(Step(step)) << "step " << step;
  for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&backup_, id), Held(&leader_, id));
  EXPECT_EQ(Held(&backup_, kWeights).second, 5);
  EXPECT_FALSE(link_->broken());
  EXPECT_EQ(err_.str(), "");
}

// A backup that refuses an update (it went its own way: here a worker pushed to it) ends the
// stream: the leader says why and goes on answering without it.
TEST_F(GrpcReplicaLinkTest, ABackupThatRefusesIsSaidAndTheLeaderGoesOnWithoutIt) {
  ASSERT_TRUE(Step(0));
  RecordingSink stray;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(backup_.Push(r, kWeights, 1, Gradient(r, 9, 6000), &stray).ok());
  }
  ASSERT_TRUE(Step(1));
  ASSERT_TRUE(Step(2));
  EXPECT_TRUE(link_->broken());
  EXPECT_EQ(Held(&leader_, kWeights).second, 3);
  link_.reset();  // its threads done: what they said is all there
  EXPECT_TRUE(absl::StrContains(err_.str(), "shard 0: its backup, shard 1 at 127.0.0.1:"))
      << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), "shard 1: the update of key 0 part 0 to version 2 "
                                            "came while its backup is at version 2"))
      << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), "the parts it leads go on without a backup"))
      << err_.str();
}

// The backup leaves a job that ended before its leader heard of the end: it cancels the
// stream, and the leader answers without it and says nothing.
TEST_F(GrpcReplicaLinkTest, ABackupLeavingAJobThatEndedIsLeftQuietly) {
  ASSERT_TRUE(Step(0));
  service_.CloseReplication();
  ASSERT_TRUE(Step(1));
  ASSERT_TRUE(Step(2));
  EXPECT_TRUE(link_->broken());
  EXPECT_EQ(Held(&leader_, kWeights).second, 3);
  link_.reset();
  EXPECT_EQ(err_.str(), "");
}

// A backup that goes without leaving (its server gone, as a killed process's is): the leader
// says so and answers without it.
TEST_F(GrpcReplicaLinkTest, ABackupThatGoesAwayIsSaid) {
  ASSERT_TRUE(Step(0));
  server_.Shutdown();
  ASSERT_TRUE(Step(1));
  ASSERT_TRUE(Step(2));
  EXPECT_TRUE(link_->broken());
  link_.reset();
  EXPECT_TRUE(absl::StrContains(err_.str(), "shard 0: its backup, shard 1 at 127.0.0.1:"))
      << err_.str();
}

// Rank 0's Init names the backup: the shard's service links the parts it leads, not the one
// it backs up for another shard, to the backup, whose copy then takes every step; a shard
// started without a way to reach a backup refuses such an Init. A shard that came back later
// copies a share from its leader (Back) and takes its steps from then on.
TEST(ReplicatedInitTest, AnInitLinksThePartsTheShardLeadsAndAShardThatCameBackCopiesAShare) {
  constexpr PartId kLed{0, 0}, kBackedUp{1, 0};
  ShardConfig config = Config(2, KVStoreMode::kDistSync, /*parts=*/2);
  ShardCore backup(1), leader(0), unlinked(2);
  ShardService backup_service(&backup);
  ASSERT_TRUE(backup.Configure(config).ok());
  ASSERT_TRUE(backup.AddPart(kLed, Gradient(1, 0, 100)).ok());
  ASSERT_TRUE(backup.AddPart({2, 0}, Gradient(2, 0, 10)).ok());
  auto backup_server = StartServer("127.0.0.1", 0, {&backup_service});
  ASSERT_TRUE(backup_server.ok()) << backup_server.status();
  std::ostringstream err;
  ShardService leader_service(&leader, nullptr, nullptr, [&err](const std::string& address) {
    return std::make_unique<GrpcReplicaLink>(v1::Shard::NewStub(MakeChannel(address)), "shard 0",
                                             address, &err);
  });
  ShardService unlinked_service(&unlinked);
  auto led_server = StartServer("127.0.0.1", 0, {&leader_service});
  auto unlinked_server = StartServer("127.0.0.1", 0, {&unlinked_service});
  ASSERT_TRUE(led_server.ok() && unlinked_server.ok());
  config.backup_address = absl::StrCat("127.0.0.1:", backup_server->port);
  const auto init = [&](int port) {
    auto stub = v1::Shard::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", port)));
    grpc::ClientContext context;
    v1::InitReply reply;
    auto writer = stub->Init(&context, &reply);
    v1::InitMessage message;
    *message.mutable_config() = ToProto(config);
    writer->Write(message);
    message.clear_config();
    EncodePart(kLed, 0, 0, Gradient(1, 0, 100), message.mutable_part());
    writer->Write(message);
    EncodePart(kBackedUp, 0, 0, Gradient(3, 0, 10), message.mutable_part());
    message.set_backup(true);
    message.set_part_set(1);
    writer->Write(message);
    writer->WritesDone();
    return writer->Finish();
  };
  const grpc::Status refused = init(unlinked_server->port);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "without a way to reach its backup"))
      << refused.error_message();
  const grpc::Status linked = init(led_server->port);
  ASSERT_TRUE(linked.ok()) << linked.error_message();
  std::vector<RecordingSink> sinks(2);
  for (int step = 0; step < 3; ++step) {
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(leader.Push(r, kLed, step, Gradient(r, step, 100), &sinks[r]).ok());
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (true) {
      {
        absl::MutexLock lock(&sinks[1].mu_);
        if (sinks[1].versions.size() == static_cast<size_t>(step + 1)) break;
      }
      ASSERT_LT(absl::Now(), deadline);
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  std::vector<float> led_value, copy;
  EXPECT_EQ(*leader.Read(kLed, &led_value), 3);
  EXPECT_EQ(*backup.Read(kLed, &copy), 3);
  EXPECT_EQ(copy, led_value);
  // The part the shard backs up has no backup of its own: its answer comes at once.
  RecordingSink direct[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(leader.Push(r, kBackedUp, 0, Gradient(r, 0, 10), &direct[r]).ok());
  }
  EXPECT_EQ(direct[0].versions, std::vector<int64_t>{1});
  EXPECT_EQ(err.str(), "");

  // A shard that came back, which rank 0 never initialised, backs share 0 up: the leader
  // copies kLed to it (and not the share it backs up), then forwards its next step there.
  ShardCore joiner(3);
  ShardService joiner_service(&joiner);
  auto joiner_server = StartServer("127.0.0.1", 0, {&joiner_service});
  ASSERT_TRUE(joiner_server.ok());
  ShardsView view;
  view.addresses = {absl::StrCat("127.0.0.1:", led_server->port), ""};
  view.share_leaders = {0, 1};
  view.share_backups = {3, -1};
  view.share_backup_addresses = {absl::StrCat("127.0.0.1:", joiner_server->port), ""};
  std::ostringstream said;
  const auto dial = [](const std::string& address) -> std::unique_ptr<v1::Shard::StubInterface> {
    return v1::Shard::NewStub(MakeChannel(address));
  };
  const absl::StatusOr<std::vector<int>> copied =
      CopyShares(view, 3, joiner_service, dial, &said);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, std::vector<int>{0});
  EXPECT_TRUE(absl::StrContains(said.str(), "shard 3: backs up share 0 (1 part) led by shard 0 "
                                            "at 127.0.0.1:"))
      << said.str();
  EXPECT_EQ(joiner_service.PartsOfShare(0), 1);
  EXPECT_EQ(joiner_service.PartsOfShare(1), 0);
  std::vector<float> joined;
  EXPECT_EQ(*joiner.Read(kLed, &joined), 3);
  EXPECT_EQ(joined, led_value);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(leader.Push(r, kLed, 3, Gradient(r, 3, 100), &sinks[r]).ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (*joiner.Read(kLed, &joined) != 4) {
    ASSERT_LT(absl::Now(), deadline);
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(*leader.Read(kLed, &led_value), 4);
  EXPECT_EQ(joined, led_value);
  // A copy that cannot reach the asking shard fails the asking, saying so.
  view.share_backups = {-1, 3};
  view.addresses[1] = view.addresses[0];
  view.share_backup_addresses[1] = "127.0.0.1:1";
  const absl::Status unreached = CopyShares(view, 3, joiner_service, dial, &said).status();
  EXPECT_TRUE(absl::StrContains(unreached.message(), "did not copy share 1 here: shard 0: the "
                                                     "copy of share 1 did not reach shard 3 at "
                                                     "127.0.0.1:1"))
      << unreached;
  leader_service.CloseReplication();
  led_server->Shutdown();
  unlinked_server->Shutdown();
  backup_server->Shutdown();
  joiner_server->Shutdown();
}

}  // namespace
}  // namespace cohort
