// Pushes through shared memory: the shard applies and answers them as it does on its gRPC
// stream, refuses hostile ones with the reason as the stream's last message, and a worker's
// transport takes this path to a shard of its own host.

#include "services/shard/shm_push_server.h"

#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/common/grpc_util.h"
#include "services/common/metrics.h"
#include "services/common/transport_security.h"
#include "services/shard/shard_metrics.h"
#include "services/shard/shard_service.h"
#include "services/wire/part_codec.h"
#include "services/wire/ring_stream.h"
#include "services/worker/grpc_shard_transport.h"

namespace cohort {
namespace {

constexpr size_t kRingBytes = 1 << 16;

// A job of `workers` workers, SGD at lr 0.5, holding `parts` parts.
ShardConfig Config(int workers, int parts) {
  ShardConfig config;
  config.num_workers = workers;
  config.num_parts = parts;
  config.optimizer.lr_schedule.base_lr = 0.5;
  config.optimizer.lr_schedule.steps_per_epoch = 10;
  return config;
}

class ShmPushServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(core_.Configure(Config(2, 2)).ok());
    ASSERT_TRUE(core_.AddPart({0, 0}, initial_key0_).ok());
    ASSERT_TRUE(core_.AddPart({1, 0}, initial_key1_).ok());
    auto server = StartShmPushServer(&core_, name_, kRingBytes);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // One message of parts, as a plain protobuf client encodes it.
  static void WriteBatch(ShmRing& ring, const v1::PartBatch& batch) {
    const std::string bytes = batch.SerializeAsString();
    const absl::Span<const char> piece(bytes.data(), bytes.size());
    ASSERT_TRUE(ring.Write(absl::MakeConstSpan(&piece, 1)).ok());
  }

  const std::string name_ = absl::StrCat("cohort-test-shm-push-", getpid());
  const std::vector<float> initial_key0_ = {1, 2, 3, 4};
  const std::vector<float> initial_key1_ = {-1, -2, -3};
  ShardCore core_{3};
  std::unique_ptr<ShmSessionServer> server_;
};

// Two workers' pushes, one of them fused: each part applied once both have pushed, and the
// answers carry every part's new value.
TEST_F(ShmPushServerTest, PushesAreAppliedAndAnswered) {
  ProcessMetrics process("job", "shard", 3);
  ShardMetrics metrics(process);
  core_.set_metrics(&metrics);
  auto w0 = DialShm(name_);
  auto w1 = DialShm(name_);
  ASSERT_TRUE(w0.ok() && w1.ok()) << w0.status() << " " << w1.status();
  v1::PartBatch fused, key0, key1;
  EncodePart({0, 0}, 0, 0, std::vector<float>{1, 1, 1, 1}, fused.add_parts());
  EncodePart({1, 0}, 0, 0, std::vector<float>{2, 2, 2}, fused.add_parts());
  EncodePart({0, 0}, 0, 1, std::vector<float>{3, 3, 3, 3}, key0.add_parts());
  EncodePart({1, 0}, 0, 1, std::vector<float>{4, 4, 4}, key1.add_parts());
  WriteBatch(w0->out(), fused);
  WriteBatch(w1->out(), key0);
  WriteBatch(w1->out(), key1);
  std::map<int64_t, std::vector<float>> answered;
  ReceivedBatch batch;
  while (answered.size() < 2) {
    auto m = w0->in().Read();
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_FALSE(StreamEnd(m->bytes()).has_value());
    ASSERT_TRUE(batch.Parse(m->bytes()).ok());
    for (size_t i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(batch.header(i).version, 1);
      std::vector<float> values(TotalBytes(batch.chunks(i)) / sizeof(float));
      CopyChunks(batch.chunks(i), values.data());
      answered[batch.header(i).id.key] = values;
    }
    batch.Clear();
    w0->in().Release();
  }
  std::vector<float> value;
  for (int64_t key : {0, 1}) {
    ASSERT_EQ(*core_.Read({key, 0}, &value), 1);
    EXPECT_EQ(answered[key], value) << "key " << key;
    EXPECT_NE(value, key == 0 ? initial_key0_ : initial_key1_);
  }
  EXPECT_EQ(metrics.received_messages.Value(), 3);
  EXPECT_EQ(metrics.received_parts.Value(), 4);
  EXPECT_EQ(server_->sessions_started(), 2);
  server_.reset();  // sessions end before the metrics go
  core_.set_metrics(nullptr);
}

// A refused push ends the worker's stream with the reason, and changes nothing.
TEST_F(ShmPushServerTest, ARefusedPushEndsTheStreamSayingWhy) {
  auto w = DialShm(name_);
  ASSERT_TRUE(w.ok()) << w.status();
  v1::PartBatch push;
  EncodePart({0, 0}, 0, 1, std::vector<float>{1, 1, 1, 1}, push.add_parts());
  WriteBatch(w->out(), push);
  WriteBatch(w->out(), push);
  absl::StatusOr<ShmRing::Message> m = w->in().Read();
  ASSERT_TRUE(m.ok()) << m.status();
  const std::optional<absl::Status> end = StreamEnd(m->bytes());
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(absl::StrContains(end->message(),
                                "worker 1's push of key 0 part 0 came twice for version 0"))
      << *end;
  w->in().Release();
  EXPECT_EQ(w->in().Read().status().code(), absl::StatusCode::kCancelled);
  std::vector<float> value;
  EXPECT_EQ(*core_.Read({0, 0}, &value), 0);
  EXPECT_EQ(value, initial_key0_);
}

// The worker's transport to a shard on its own host: its pushes take the shared-memory path,
// and the answers arrive as over gRPC.
class Answers final : public AnswerReceiver {
 public:
  void OnAnswers(int shard, absl::Span<const Answer> answers) override {
    absl::MutexLock lock(&mu_);
    for (const Answer& a : answers) {
      std::vector<float> values(TotalBytes(a.values) / sizeof(float));
      CopyChunks(a.values, values.data());
      got_[a.header.id.key] = values;
    }
  }
  void OnStreamEnd(int, const absl::Status&) override {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }
  // The answers once n keys have some, or the stream ended.
  std::map<int64_t, std::vector<float>> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    want_ = n;
    mu_.Await(absl::Condition(this, &Answers::Done));
    return got_;
  }

 private:
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return got_.size() >= want_ || ended_; }

  absl::Mutex mu_;
  size_t want_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, std::vector<float>> got_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(ShmTransportTest, AShardOnThisHostIsReachedThroughSharedMemory) {
  ShardCore core(0);
  ASSERT_TRUE(core.Configure(Config(1, 1)).ok());
  const std::vector<float> initial = {1, 2, 3};
  ASSERT_TRUE(core.AddPart({0, 0}, initial).ok());
  ShardService service(&core);
  auto grpc_server = StartServer("127.0.0.1", 0, {&service});
  ASSERT_TRUE(grpc_server.ok()) << grpc_server.status();
  auto shm = StartShmPushServer(&core, ShardRendezvousName("127.0.0.1", grpc_server->port),
                                  kRingBytes);
  ASSERT_TRUE(shm.ok()) << shm.status();

  for (bool shared_memory : {true, false}) {
    SCOPED_TRACE(shared_memory ? "shared memory" : "gRPC");
    auto transport = MakeGrpcShardTransport({absl::StrCat("127.0.0.1:", grpc_server->port)},
                                            TransportSecurity::Plaintext(), 0,
                                            absl::ZeroDuration(), shared_memory);
    Answers answers;
    transport->Open(&answers);
    const int64_t version = shared_memory ? 0 : 1;
    const std::vector<float> grad = {1, 1, 1};
    transport->Send(0, OutgoingPart{PartHeader{{0, 0}, version, 0}, grad, nullptr});
    transport->Flush();
    const auto got = answers.WaitFor(1);
    ASSERT_EQ(got.size(), 1u);
    std::vector<float> value;
    ASSERT_EQ(*core.Read({0, 0}, &value), version + 1);
    EXPECT_EQ(got.at(0), value);
    transport->Close();
  }
  EXPECT_EQ((*shm)->sessions_started(), 1);  // the first transport's, not the second's
  grpc_server->Shutdown(std::chrono::system_clock::now());
}

// The rings a worker finds are those of the address it dials, or of a shard listening at every
// address; a shard at another address with the same port is another shard.
TEST(ShmTransportTest, AWorkerTakesOnlyTheRingsOfTheAddressItDials) {
  ShardCore core(0);
  ASSERT_TRUE(core.Configure(Config(1, 1)).ok());
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>{1, 2, 3}).ok());
  ShardService service(&core);
  auto grpc_server = StartServer("127.0.0.1", 0, {&service});
  ASSERT_TRUE(grpc_server.ok()) << grpc_server.status();

  int64_t version = 0;
  for (const std::string listening : {"127.0.0.1", "", "127.0.0.2"}) {
    SCOPED_TRACE("rings offered at '" + listening + "'");
    auto shm = StartShmPushServer(&core, ShardRendezvousName(listening, grpc_server->port),
                                    kRingBytes);
    ASSERT_TRUE(shm.ok()) << shm.status();
    auto transport = MakeGrpcShardTransport({absl::StrCat("127.0.0.1:", grpc_server->port)},
                                            TransportSecurity::Plaintext(), 0,
                                            absl::ZeroDuration(), /*shared_memory=*/true);
    Answers answers;
    transport->Open(&answers);
    const std::vector<float> grad = {1, 1, 1};
    transport->Send(0, OutgoingPart{PartHeader{{0, 0}, version, 0}, grad, nullptr});
    transport->Flush();
    ASSERT_EQ(answers.WaitFor(1).size(), 1u);
    std::vector<float> value;
    ASSERT_EQ(*core.Read({0, 0}, &value), ++version);
    transport->Close();
    EXPECT_EQ((*shm)->sessions_started(), listening == "127.0.0.2" ? 0 : 1);
  }
  grpc_server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace cohort
