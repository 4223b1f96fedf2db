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

TEST_F(GrpcReplicaLinkTest, WithoutItsBackupTheLeaderSaysSoAndGoesOn) {
  ASSERT_TRUE(Step(0));
  server_.Shutdown();
  ASSERT_TRUE(Step(1));
  ASSERT_TRUE(Step(2));
  EXPECT_TRUE(link_->broken());
  EXPECT_EQ(Held(&leader_, kWeights).second, 3);
  EXPECT_TRUE(absl::StrContains(err_.str(), "shard 0: its backup, shard 1 at 127.0.0.1:"))
      << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), "the parts it leads go on without a backup"))
      << err_.str();
}

}  // namespace
}  // namespace cohort
