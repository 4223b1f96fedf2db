// A leader's parts replicated to a backup shard over a real stream, a Replicate call on
// loopback or a pair of shared-memory rings: the backup ends bitwise equal to the leader, the
// workers hear each step once the backup holds it, and when the backup refuses, leaves or goes
// away the leader says so (or, when it left a job that ended, nothing) and answers without it.

#include "services/shard/replication/backup_link.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/common/grpc_util.h"
#include "services/shard/replication/grpc_backup_link.h"
#include "services/shard/shard_core_testing.h"
#include "services/shard/replication/shard_replication.h"
#include "services/shard/shard_service.h"
#include "services/shard/shard_set_up.h"
#include "services/shard/replication/share_copier.h"
#include "services/shard/replication/shm_backup_link.h"
#include "services/wire/config_proto.h"
#include "services/wire/part_codec.h"
#include "services/wire/ring_stream.h"
#include "services/wire/shm_region.h"
#include "services/wire/shm_rendezvous.h"

namespace cohort {
namespace {

constexpr PartId kWeights{0, 0};
constexpr PartId kStats{1, 0};
// Large enough that the link reuses its buffers (StreamBackupLink::Spare).
constexpr int kWeightFloats = 20000;
// Small enough that batches wrap around its end, their values read from both sides of it.
constexpr size_t kRingBytes = 1 << 18;

// Over gRPC; through the rings alone; with a pool beside them (the updates made in it), and
// with a pool too small for one update (every update through the ring after all).
enum class Transport { kGrpc, kSharedMemory, kSharedPool, kSharedPoolTooSmall };

std::string UniqueName(absl::string_view what) {
  static int next = 0;
  return absl::StrCat("cohort-backup-link-test-", getpid(), "-", what, "-", next++);
}

std::unique_ptr<StreamBackupLink> LinkTo(std::unique_ptr<BackupStream> stream,
                                          const std::string& where, std::ostream* err) {
  return std::make_unique<StreamBackupLink>(std::move(stream), "shard 0",
                                             absl::StrCat("shard 1 at ", where), err);
}

// Both workers push both parts of `step` to the leader; true once each has both answers.
bool Step(ShardCore& leader, std::vector<RecordingSink>& sinks, int step) {
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(leader.Push(r, kWeights, step, Gradient(r, step, kWeightFloats), &sinks[r]).ok());
    EXPECT_TRUE(leader.Push(r, kStats, step, Gradient(r + 2, step, 4), &sinks[r]).ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    bool all = true;
    for (RecordingSink& s : sinks) {
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

// A shard's replication and its service, set up (make_link: how it reaches a backup).
struct ServedShard {
  explicit ServedShard(ShardCore* core, ShardReplication::LinkFactory make_link = nullptr)
      : replication(core, &set_up, std::move(make_link), &std::cerr),
        service(core, &set_up, nullptr, &replication) {
    set_up.Done();
  }
  ShardSetUp set_up;
  ShardReplication replication;
  ShardService service;
};

void SetUpCores(std::initializer_list<ShardCore*> cores) {
  ShardConfig config = Config(2, KVStoreMode::kDistSync, /*parts=*/2);
  config.auxiliary_keys = {kStats.key};
  for (ShardCore* core : cores) {
    ASSERT_TRUE(core->Configure(config).ok());
    ASSERT_TRUE(core->AddPart(kWeights, Gradient(5, 0, kWeightFloats)).ok());
    ASSERT_TRUE(core->AddPart(kStats, Gradient(6, 0, 4)).ok());
  }
}

class BackupLinkTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    SetUpCores({&leader_, &backup_});
    if (GetParam() == Transport::kGrpc) {
      auto server = StartServer("127.0.0.1", 0, {&served_.service});
      ASSERT_TRUE(server.ok()) << server.status();
      server_ = std::move(*server);
      const std::string address = absl::StrCat("127.0.0.1:", server_.port);
      link_ = LinkTo(std::make_unique<GrpcBackupStream>(v1::Shard::NewStub(MakeChannel(address))),
                     address, &err_);
    } else {
      const std::string name = UniqueName("backup");
      const size_t pool_bytes = GetParam() == Transport::kSharedPool           ? 4 * kRingBytes
                                : GetParam() == Transport::kSharedPoolTooSmall ? 4096
                                                                               : 0;
      auto server = StartShmBackupServer(&served_.replication, name, kRingBytes, pool_bytes);
      ASSERT_TRUE(server.ok()) << server.status();
      shm_server_ = *std::move(server);
      absl::StatusOr<ShmChannel> channel = DialShm(name);
      ASSERT_TRUE(channel.ok()) << channel.status();
      link_ = LinkTo(std::make_unique<ShmBackupStream>(*std::move(channel)), "@" + name, &err_);
    }
    ASSERT_TRUE(leader_.SetBackup(kWeights, link_.get()).ok());
    ASSERT_TRUE(leader_.SetBackup(kStats, link_.get()).ok());
  }
  void TearDown() override {
    link_.reset();
    shm_server_.reset();
    server_.Shutdown();
  }

  bool Step(int step) { return cohort::Step(leader_, sinks_, step); }

  ShardCore leader_{0};
  ShardCore backup_{1};
  ServedShard served_{&backup_};
  RunningServer server_;
  std::unique_ptr<ShmSessionServer> shm_server_;
  std::ostringstream err_;
  std::unique_ptr<StreamBackupLink> link_;
  std::vector<RecordingSink> sinks_ = std::vector<RecordingSink>(2);
};

INSTANTIATE_TEST_SUITE_P(Transports, BackupLinkTest,
                         ::testing::Values(Transport::kGrpc, Transport::kSharedMemory,
                                           Transport::kSharedPool,
                                           Transport::kSharedPoolTooSmall),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           switch (info.param) {
                             case Transport::kGrpc: return "Grpc";
                             case Transport::kSharedMemory: return "SharedMemory";
                             case Transport::kSharedPool: return "SharedPool";
                             case Transport::kSharedPoolTooSmall: return "SharedPoolTooSmall";
                           }
                           return "";
                         });

TEST_P(BackupLinkTest, TheBackupTakesEveryStepBitwise) {
  // Updates are made where the backup reads them only with a pool that has room.
  EXPECT_EQ(link_->Spare(kWeightFloats * sizeof(float)).pool_offset() >= 0,
            GetParam() == Transport::kSharedPool);
  for (int step = 0; step < 10; ++step) ASSERT_TRUE(Step(step)) << "step " << step;
  for (PartId id : {kWeights, kStats}) EXPECT_EQ(Held(&backup_, id), Held(&leader_, id));
  EXPECT_EQ(Held(&backup_, kWeights).second, 10);
  EXPECT_FALSE(link_->broken());
  EXPECT_EQ(err_.str(), "");
}

// A backup that refuses an update (it went its own way: here a worker pushed to it) ends the
// stream: the leader says why and goes on answering without it.
TEST_P(BackupLinkTest, ABackupThatRefusesIsSaidAndTheLeaderGoesOnWithoutIt) {
  ASSERT_TRUE(Step(0));
  RecordingSink stray;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(backup_.Push(r, kWeights, 1, Gradient(r, 9, kWeightFloats), &stray).ok());
  }
  ASSERT_TRUE(Step(1));
  ASSERT_TRUE(Step(2));
  EXPECT_TRUE(link_->broken());
  EXPECT_EQ(Held(&leader_, kWeights).second, 3);
  link_.reset();  // its threads done: what they said is all there
  EXPECT_TRUE(absl::StrContains(err_.str(), "shard 0: its backup, shard 1 at ")) << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), "shard 1: the update of key 0 part 0 to version 2 "
                                            "came while its backup is at version 2"))
      << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), "the parts it leads go on without a backup"))
      << err_.str();
}

// The backup leaves a job that ended before its leader heard of the end: it cancels the
// stream (its service's, and its shared-memory server goes), and the leader answers without it
// and says nothing.
TEST_P(BackupLinkTest, ABackupLeavingAJobThatEndedIsLeftQuietly) {
  ASSERT_TRUE(Step(0));
  served_.replication.Close();
  shm_server_.reset();
  ASSERT_TRUE(Step(1));
  ASSERT_TRUE(Step(2));
  EXPECT_TRUE(link_->broken());
  EXPECT_EQ(Held(&leader_, kWeights).second, 3);
  link_.reset();
  EXPECT_EQ(err_.str(), "");
}

// A pool's stretches come in the order asked for, go back in any order, wrap around its end,
// and are refused, not overlapped, when there is no room.
TEST(SharedUpdatePoolTest, HandsOutStretchesInOrderAndTakesThemBackInAny) {
  auto region = ShmRegion::Create(1024, "a test pool");
  ASSERT_TRUE(region.ok()) << region.status();
  auto pool = std::make_shared<SharedUpdatePool>(*region);
  std::optional<UpdateBuffer> a = pool->Take(300), b = pool->Take(300), c = pool->Take(300);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->pool_offset(), 0);
  EXPECT_EQ(b->pool_offset(), 320);  // 64-byte aligned
  EXPECT_EQ(c->pool_offset(), 640);
  EXPECT_EQ(c->data(), (*region)->data() + 640);
  EXPECT_EQ(c->size(), 300u);
  EXPECT_FALSE(pool->Take(100));  // 64 bytes left at the end, and none before a
  b.reset();
  EXPECT_FALSE(pool->Take(100));  // a still holds the start
  a.reset();                      // a and b free: the room before c
  std::optional<UpdateBuffer> d = pool->Take(100);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->pool_offset(), 0);  // wrapped
  EXPECT_FALSE(pool->Take(600));   // 512 bytes between d and c
  std::optional<UpdateBuffer> e = pool->Take(500);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pool_offset(), 128);
  EXPECT_FALSE(pool->Take(1));  // full
  c.reset();
  d.reset();
  e.reset();
  std::optional<UpdateBuffer> whole = pool->Take(1024);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->pool_offset(), 0);
  EXPECT_FALSE(pool->Take(1025 - 1024));
}

// A leader that stopped reading acknowledgements (stuck, or stopped) fills the ring they come
// back on: a backup leaving the job then does not wait for it.
TEST(ShmBackupLinkTest, ABackupLeavesThoughItsLeaderStoppedReading) {
  ShardCore backup(1);
  ServedShard served(&backup);
  const std::string name = UniqueName("stuck");
  auto server = StartShmBackupServer(&served.replication, name, 1 << 12, 0);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<ShmChannel> leader = DialShm(name);
  ASSERT_TRUE(leader.ok()) << leader.status();
  // Empty batches, each acknowledged: many more than the acknowledgements' ring holds.
  const char empty[4] = {};
  const absl::Span<const char> piece(empty, sizeof empty);
  for (int i = 0; i < 2000; ++i) {
    if (!leader->out().Write({&piece, 1}, absl::Milliseconds(200)).ok()) break;
  }
  absl::Notification gone;
  std::thread leaving([&] {
    server->reset();
    gone.Notify();
  });
  EXPECT_TRUE(gone.WaitForNotificationWithTimeout(absl::Seconds(5)));
  leaving.join();
}

// A batch naming values past the end of the pool (or with no pool offered) is refused as
// damaged: the backup ends the stream saying so, and reads nothing outside the pool.
TEST(ShmBackupLinkTest, AnUpdateOutsideThePoolIsRefusedAsDamaged) {
  for (const size_t pool_bytes : {size_t{0}, size_t{1} << 16}) {
    ShardCore backup(1);
    SetUpCores({&backup});
    ServedShard served(&backup);
    const std::string name = UniqueName("outside");
    auto server = StartShmBackupServer(&served.replication, name, 1 << 16, pool_bytes);
    ASSERT_TRUE(server.ok()) << server.status();
    absl::StatusOr<ShmChannel> leader = DialShm(name);
    ASSERT_TRUE(leader.ok()) << leader.status();
    v1::LeaderUpdateBatch batch;
    v1::LeaderUpdate* u = batch.add_updates();
    u->set_key(kWeights.key);
    u->set_version(1);
    u->set_pool_offset(static_cast<int64_t>(pool_bytes) - 64);
    u->set_pool_value_bytes(128);
    std::string message(4, '\0');
    batch.AppendToString(&message);
    const uint32_t length = static_cast<uint32_t>(message.size() - 4);
    std::memcpy(message.data(), &length, 4);
    const absl::Span<const char> piece(message);
    ASSERT_TRUE(leader->out().Write({&piece, 1}).ok());
    absl::StatusOr<ShmRing::Message> answer = leader->in().Read();
    ASSERT_TRUE(answer.ok()) << answer.status();
    const std::optional<absl::Status> end = StreamEnd(answer->bytes());
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->code(), absl::StatusCode::kDataLoss) << *end;
    EXPECT_TRUE(absl::StrContains(end->message(), "128 bytes at byte")) << *end;
    EXPECT_EQ(Held(&backup, kWeights).second, 0);
  }
}

// A backup that goes without leaving (its server gone, as a killed process's is): the leader
// says so and answers without it.
TEST(GrpcBackupLinkTest, ABackupThatGoesAwayIsSaid) {
  ShardCore leader(0), backup(1);
  SetUpCores({&leader, &backup});
  ShardService service(&backup);
  auto server = StartServer("127.0.0.1", 0, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", server->port);
  std::ostringstream err;
  auto link = LinkTo(std::make_unique<GrpcBackupStream>(v1::Shard::NewStub(MakeChannel(address))),
                     address, &err);
  ASSERT_TRUE(leader.SetBackup(kWeights, link.get()).ok());
  std::vector<RecordingSink> sinks(2);
  ASSERT_TRUE(Step(leader, sinks, 0));
  server->Shutdown();
  ASSERT_TRUE(Step(leader, sinks, 1));
  ASSERT_TRUE(Step(leader, sinks, 2));
  EXPECT_TRUE(link->broken());
  link.reset();
  EXPECT_TRUE(absl::StrContains(err.str(), "shard 0: its backup, shard 1 at 127.0.0.1:"))
      << err.str();
}

// A backup on this host whose process ends without a word (killed) after acknowledging the
// first step: the leader notices through the rings, says so and answers without it.
TEST(ShmBackupLinkTest, ABackupWhoseProcessEndsIsSaid) {
  const std::string name = UniqueName("dies");
  auto listener = ShmListener::Listen(name, kRingBytes);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The backup: acknowledges the first batch, reads the next, and dies.
    absl::StatusOr<ShmChannel> channel = (*listener)->Accept();
    if (!channel.ok()) _exit(2);
    for (int batch = 0; batch < 2; ++batch) {
      absl::StatusOr<ShmRing::Message> m = channel->in().Read();
      if (!m.ok()) _exit(3);
      channel->in().Release();
      if (batch == 1) break;
      v1::BackupAck ack;
      ack.set_applied(1);
      const std::string bytes = ack.SerializeAsString();
      const absl::Span<const char> piece(bytes);
      if (!channel->out().Write({&piece, 1}).ok()) _exit(4);
    }
    _exit(0);  // no destructor: the rings' socket closes with the process
  }
  listener->reset();
  ShardCore leader(0);
  SetUpCores({&leader});
  absl::StatusOr<ShmChannel> channel = DialShm(name);
  ASSERT_TRUE(channel.ok()) << channel.status();
  std::ostringstream err;
  auto link = LinkTo(std::make_unique<ShmBackupStream>(*std::move(channel)), "@" + name, &err);
  ASSERT_TRUE(leader.SetBackup(kWeights, link.get()).ok());
  std::vector<RecordingSink> sinks(2);
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(Step(leader, sinks, step)) << step;
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(link->broken());
  link.reset();
  EXPECT_TRUE(absl::StrContains(err.str(), "shard 0: its backup, shard 1 at @" + name +
                                               ", is gone (its process ended)"))
      << err.str();
}

// Rank 0's Init names the backup: the shard's service links the parts it leads, not the one
// it backs up for another shard, to the backup, whose copy then takes every step; a shard
// started without a way to reach a backup refuses such an Init. A shard that came back later
// copies a share from its leader (CopyShare) and takes its steps from then on.
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
  ServedShard leading(&leader, [&err](const std::string& address) {
    return LinkTo(std::make_unique<GrpcBackupStream>(v1::Shard::NewStub(MakeChannel(address))),
                  address, &err);
  });
  ShardService unlinked_service(&unlinked);
  auto led_server = StartServer("127.0.0.1", 0, {&leading.service});
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
    message.set_share(1);
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
  ServedShard joining(&joiner);
  auto joiner_server = StartServer("127.0.0.1", 0, {&joining.service});
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
      CopyShares(view, 3, joining.replication, dial, &said);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, std::vector<int>{0});
  EXPECT_TRUE(absl::StrContains(said.str(), "shard 3: backs up share 0 (1 part) led by shard 0 "
                                            "at 127.0.0.1:"))
      << said.str();
  EXPECT_EQ(joining.replication.PartsOfShare(0), 1);
  EXPECT_EQ(joining.replication.PartsOfShare(1), 0);
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
  const absl::Status unreached = CopyShares(view, 3, joining.replication, dial, &said).status();
  EXPECT_TRUE(absl::StrContains(unreached.message(), "did not copy share 1 here: shard 0: the "
                                                     "copy of share 1 did not reach shard 3 at "
                                                     "127.0.0.1:1"))
      << unreached;
  leading.replication.Close();
  led_server->Shutdown();
  unlinked_server->Shutdown();
  backup_server->Shutdown();
  joiner_server->Shutdown();
}

}  // namespace
}  // namespace cohort
