// Hostile pushes over a real PushPull stream (loopback), sent by a plain protobuf client: each
// is refused with a status naming the worker and what was wrong, the stream ends, and the
// shard's parameters are untouched; a flood neither grows the shard nor stops the others.

#include "services/shard/shard_service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/common/durable_file.h"
#include "services/common/grpc_util.h"
#include "services/common/job_certs_testing.h"
#include "services/common/metrics.h"
#include "services/common/test_tmp_dir.h"
#include "trainer/io/whole_file.h"
#include "services/shard/shard_metrics.h"
#include "services/wire/part_codec.h"

namespace cohort {
namespace {

// The batch's only part, cleared for encoding (each message below carries one part).
v1::Part* OnlyPart(v1::PartBatch* batch) {
  batch->clear_parts();
  return batch->add_parts();
}

class ShardServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardConfig config;
    config.num_workers = 2;
    config.num_parts = 2;
    config.optimizer.lr_schedule.base_lr = 0.5;
    config.optimizer.lr_schedule.steps_per_epoch = 10;
    ASSERT_TRUE(core_.Configure(config).ok());
    ASSERT_TRUE(core_.AddPart({0, 0}, initial_key0_).ok());
    ASSERT_TRUE(core_.AddPart({1, 0}, initial_key1_).ok());
    auto server = StartServer("127.0.0.1", 0, {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = v1::Shard::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", server_.port)));
  }
  void TearDown() override { server_.Shutdown(std::chrono::system_clock::now()); }

  // Sends the messages on one PushPull stream and returns how the shard ended it.
  grpc::Status PushAll(const std::vector<v1::PartBatch>& messages) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = stub_->PushPull(&context);
    for (const v1::PartBatch& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    v1::PartBatch answer;
    while (stream->Read(&answer)) {
    }
    return stream->Finish();
  }

  static v1::PartBatch Push(int rank, int64_t key, int64_t version, std::vector<float> grad) {
    v1::PartBatch m;
    EncodePart({key, 0}, version, rank, grad, OnlyPart(&m));
    return m;
  }

  void ExpectUntouched() {
    std::vector<float> value;
    EXPECT_EQ(*core_.Read({0, 0}, &value), 0);
    EXPECT_EQ(value, initial_key0_);
    EXPECT_EQ(*core_.Read({1, 0}, &value), 0);
    EXPECT_EQ(value, initial_key1_);
  }

  void ExpectRefused(const std::vector<v1::PartBatch>& messages, absl::string_view says) {
    const grpc::Status status = PushAll(messages);
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(absl::StrContains(status.error_message(), says))
        << "status: " << status.error_message() << "\nexpected it to contain: " << says;
    ExpectUntouched();
  }

  const std::vector<float> initial_key0_ = {1, 2, 3, 4};
  const std::vector<float> initial_key1_ = {-1, -2, -3};
  ShardCore core_{3};
  ShardService service_{&core_};
  RunningServer server_;
  std::unique_ptr<v1::Shard::Stub> stub_;
};

TEST_F(ShardServiceTest, WrongSizeIsRefused) {
  ExpectRefused({Push(1, 0, 0, {1, 1, 1})},
                "shard 3: worker 1's push of key 0 part 0 has 12 bytes of F32 values; the part "
                "has 4 elements (16 bytes)");
}

TEST_F(ShardServiceTest, WrongDtypeIsRefused) {
  v1::PartBatch m = Push(1, 0, 0, {1, 1, 1, 1});
  m.mutable_parts(0)->mutable_header()->set_dtype(v1::DTYPE_UNSPECIFIED);
  ExpectRefused({m}, "worker 1's key 0 part 0: dtype DTYPE_UNSPECIFIED; expected F32, F16, BF16 or "
                     "TWO_BIT");
}

TEST_F(ShardServiceTest, HeaderThatDisagreesWithTheDataIsRefused) {
  v1::PartBatch m = Push(0, 1, 0, {1, 1, 1});
  m.mutable_parts(0)->mutable_header()->set_bytes(16);
  ExpectRefused({m}, "worker 0's key 1 part 0: header says 16 bytes, the message carries 12");
}

TEST_F(ShardServiceTest, UnknownKeyIsRefused) {
  ExpectRefused({Push(0, 7, 0, {1})},
                "shard 3 does not hold key 7 part 0: the worker's partition map differs");
}

TEST_F(ShardServiceTest, FutureVersionIsRefused) {
  ExpectRefused({Push(1, 0, 3, {1, 1, 1, 1})},
                "worker 1's push of key 0 part 0 was computed on version 3 but the part is at "
                "version 0");
}

TEST_F(ShardServiceTest, StaleVersionIsRefused) {
  // Both workers complete step 0 of key 1; then worker 0 pushes step 0 again.
  grpc::ClientContext c0, c1;
  auto w0 = stub_->PushPull(&c0);
  auto w1 = stub_->PushPull(&c1);
  ASSERT_TRUE(w0->Write(Push(0, 1, 0, {1, 1, 1})));
  ASSERT_TRUE(w1->Write(Push(1, 1, 0, {3, 3, 3})));
  v1::PartBatch answer;
  ASSERT_TRUE(w0->Read(&answer));
  EXPECT_EQ(answer.parts(0).header().version(), 1);
  ASSERT_TRUE(w0->Write(Push(0, 1, 0, {1, 1, 1})));
  w0->WritesDone();
  while (w0->Read(&answer)) {
  }
  const grpc::Status status = w0->Finish();
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "worker 0's push of key 1 part 0 was computed on version 0 but "
                                "the part is at version 1"))
      << status.error_message();
  std::vector<float> value;
  EXPECT_EQ(*core_.Read({1, 0}, &value), 1);  // step 0 applied once: -1 - 0.5 × 2, ...
  EXPECT_EQ(value, (std::vector<float>{-2, -3, -4}));
  w1->WritesDone();
  while (w1->Read(&answer)) {
  }
  EXPECT_TRUE(w1->Finish().ok());
}

// Parts fused into one message are taken apart on the shard, each applied as if it had come
// alone; the answers carry every part's new value.
TEST_F(ShardServiceTest, AFusedMessageIsAppliedPartByPart) {
  ProcessMetrics process("job", "shard", 3);
  ShardMetrics metrics(process);
  core_.set_metrics(&metrics);
  v1::PartBatch fused, key0, key1;
  EncodePart({0, 0}, 0, 0, std::vector<float>{1, 1, 1, 1}, fused.add_parts());
  EncodePart({1, 0}, 0, 0, std::vector<float>{2, 2, 2}, fused.add_parts());
  EncodePart({0, 0}, 0, 1, std::vector<float>{3, 3, 3, 3}, key0.add_parts());
  EncodePart({1, 0}, 0, 1, std::vector<float>{4, 4, 4}, key1.add_parts());
  grpc::ClientContext c0, c1;
  auto w0 = stub_->PushPull(&c0);
  auto w1 = stub_->PushPull(&c1);
  ASSERT_TRUE(w0->Write(fused));
  ASSERT_TRUE(w1->Write(key0));
  ASSERT_TRUE(w1->Write(key1));
  std::map<int64_t, std::vector<float>> answered;
  v1::PartBatch answer;
  while (answered.size() < 2 && w0->Read(&answer)) {
    for (const v1::Part& part : answer.parts()) {
      std::vector<float> values;
      ASSERT_TRUE(DecodePart(part, &values).ok());
      EXPECT_EQ(part.header().version(), 1);
      answered[part.header().key()] = values;
    }
  }
  std::vector<float> value;
  for (int64_t key : {0, 1}) {
    ASSERT_EQ(*core_.Read({key, 0}, &value), 1);
    EXPECT_EQ(answered[key], value) << "key " << key;
    EXPECT_NE(value, key == 0 ? initial_key0_ : initial_key1_);
  }
  EXPECT_EQ(metrics.received_messages.Value(), 3);
  EXPECT_EQ(metrics.received_parts.Value(), 4);
  for (auto* w : {w0.get(), w1.get()}) {
    w->WritesDone();
    while (w->Read(&answer)) {
    }
  }
  EXPECT_TRUE(w0->Finish().ok());
  EXPECT_TRUE(w1->Finish().ok());
  core_.set_metrics(nullptr);
}

TEST_F(ShardServiceTest, ASecondPushOfAVersionIsRefused) {
  ExpectRefused({Push(1, 0, 0, {1, 1, 1, 1}), Push(1, 0, 0, {1, 1, 1, 1})},
                "worker 1's push of key 0 part 0 came twice for version 0");
}

TEST_F(ShardServiceTest, AStreamCannotChangeItsRank) {
  ExpectRefused({Push(0, 0, 0, {1, 1, 1, 1}), Push(1, 1, 0, {1, 1, 1})},
                "the stream of worker 0 carried a push claiming rank 1");
}

TEST_F(ShardServiceTest, RankOutsideTheJobIsRefused) {
  ExpectRefused({Push(5, 0, 0, {1, 1, 1, 1})}, "push from rank 5 in a job of 2 workers");
}

// The same shard served over mutual TLS with a job token: workers the transport refuses push
// a full step of key 0 (both ranks) and the parameter does not move; the job's own worker
// pushing the same step moves it.
class ShardOverTlsTest : public ShardServiceTest {
 protected:
  void SetUp() override {
    ShardServiceTest::SetUp();
    const std::string tmp = TmpDir();
    ASSERT_TRUE(MakeJobCerts(tmp + "/job", "shard worker").ok());
    ASSERT_TRUE(MakeJobCerts(tmp + "/other", "worker").ok());
    // An intruder who knows the job's CA certificate (it is public) but holds a key and
    // certificate of another CA.
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"job/ca.pem", "ca.pem"},
                                   {"other/worker.pem", "worker.pem"},
                                   {"other/worker.key", "worker.key"}}) {
      auto text = ReadWholeFile(absl::StrCat(tmp, "/", from));
      ASSERT_TRUE(text.ok()) << text.status();
      mkdir((tmp + "/intruder").c_str(), 0700);
      ASSERT_TRUE(WriteSecretFile(absl::StrCat(tmp, "/intruder/", to), *text).ok());
    }
    ASSERT_TRUE(WriteToken(tmp + "/token", "the-job-token").ok());
    ASSERT_TRUE(WriteToken(tmp + "/wrong", "not-the-job-token").ok());
    auto security = LoadSecurity(tmp + "/job", "shard", tmp + "/token");
    ASSERT_TRUE(security.ok()) << security.status();
    security_ = *security;
    auto server = StartServer("127.0.0.1", 0, {&tls_service_}, *security_);
    ASSERT_TRUE(server.ok()) << server.status();
    tls_server_ = std::move(*server);
  }
  void TearDown() override {
    tls_server_.Shutdown(std::chrono::system_clock::now());
    ShardServiceTest::TearDown();
  }

  std::unique_ptr<v1::Shard::Stub> StubAs(const std::string& dir, const std::string& token) {
    auto security = LoadSecurity(dir, "worker", token);
    EXPECT_TRUE(security.ok()) << security.status();
    return v1::Shard::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", tls_server_.port), **security));
  }

  // Ranks 0 and 1 each push key 0 at version 0 on a stream of their own; the statuses.
  static std::vector<grpc::Status> PushAStep(v1::Shard::Stub* stub) {
    grpc::ClientContext c0, c1;
    c0.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    c1.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto w0 = stub->PushPull(&c0);
    auto w1 = stub->PushPull(&c1);
    w0->Write(Push(0, 0, 0, {1, 1, 1, 1}));
    w1->Write(Push(1, 0, 0, {3, 3, 3, 3}));
    v1::PartBatch answer;
    for (auto* w : {w0.get(), w1.get()}) {
      w->WritesDone();
      while (w->Read(&answer)) {
      }
    }
    return {w0->Finish(), w1->Finish()};
  }

  std::shared_ptr<const TransportSecurity> security_;
  ShardService tls_service_{&core_};
  RunningServer tls_server_;
};

TEST_F(ShardOverTlsTest, ARefusedWorkerCannotChangeAParameter) {
  const std::string tmp = TmpDir();
  const struct {
    const char* what;
    std::string dir, token;
  } refused[] = {{"the wrong token", tmp + "/job", tmp + "/wrong"},
                 {"no token", tmp + "/job", ""},
                 {"another CA's certificate", tmp + "/intruder", tmp + "/token"}};
  for (const auto& r : refused) {
    for (const grpc::Status& status : PushAStep(StubAs(r.dir, r.token).get())) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << r.what << ": " << status.error_message();
    }
    ExpectUntouched();
  }
  EXPECT_EQ(security_->refused_requests(), 6);

  for (const grpc::Status& status : PushAStep(StubAs(tmp + "/job", tmp + "/token").get())) {
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  std::vector<float> value;
  EXPECT_EQ(*core_.Read({0, 0}, &value), 1);
  EXPECT_NE(value, initial_key0_);
}

TEST_F(ShardServiceTest, RollBackWithoutCheckpointsIsRefusedSayingWhatToGive) {
  grpc::ClientContext context;
  v1::RollBackRequest request;
  request.set_step(10);
  v1::RollBackReply reply;
  const grpc::Status status = stub_->RollBack(&context, request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "--checkpoint_dir"))
      << status.error_message();
  ExpectUntouched();
}

// A stream opened before the shard rolled back carries pushes of an undone past: refused, and
// counted by the core's metrics as rolled_back; the values are the checkpoint's.
TEST_F(ShardServiceTest, APushOnAStreamFromBeforeARollBackIsRefused) {
  grpc::ClientContext a_context, b_context;
  auto a = stub_->PushPull(&a_context);
  auto b = stub_->PushPull(&b_context);
  ASSERT_TRUE(a->Write(Push(0, 1, 0, {1, 1, 1})));
  ASSERT_TRUE(b->Write(Push(1, 1, 0, {1, 1, 1})));
  v1::PartBatch answer;
  ASSERT_TRUE(a->Read(&answer));  // step 0 of key 1 done: both streams are open at the shard
  ShardCheckpoint at0;
  at0.mode = "dist_sync";
  at0.num_workers = 2;
  at0.parts = {{{0, 0}, 0, initial_key0_, {}}, {{1, 0}, 0, initial_key1_, {}}};
  ASSERT_TRUE(core_.RollBack(at0).ok());
  a->Write(Push(0, 0, 0, {1, 1, 1, 1}));
  a->WritesDone();
  while (a->Read(&answer)) {
  }
  const grpc::Status status = a->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "came on a stream opened before the shard rolled back to step 0"))
      << status.error_message();
  b_context.TryCancel();
  ExpectUntouched();
}

// A push made in another membership generation (an elastic job's workers changed since) is
// refused before its rank, version or values are looked at, and counted as stale_generation.
TEST_F(ShardServiceTest, APushOfAnotherGenerationIsRefusedAndCounted) {
  ProcessMetrics process("job-g", "shard", 3);
  ShardMetrics metrics(process);
  core_.set_metrics(&metrics);
  v1::PartBatch m = Push(0, 0, 0, {1, 1, 1, 1});
  m.mutable_parts(0)->mutable_header()->set_generation(1);
  ExpectRefused({m}, "shard 3: worker 0's push of key 0 part 0 was made in membership "
                     "generation 1, but the job's workers changed: it is in generation 0");
  EXPECT_EQ(metrics.rejected[static_cast<int>(Rejection::kStaleGeneration)]->Value(), 1);
  core_.set_metrics(nullptr);
}

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// dist_async, a 4 MiB part. One worker pushes valid parts as fast as it can and never reads an
// answer, another sends oversized and malformed messages: the shard's memory stays bounded (it
// stops reading the flooder once 64 MiB of its answers wait) and the other worker's training
// goes on.
TEST(ShardFloodTest, FloodsAndSlowReadersNeitherGrowTheShardNorStopTheOthers) {
  ShardCore core(0);
  ShardConfig config;
  config.num_workers = 2;
  config.mode = KVStoreMode::kDistAsync;
  config.num_parts = 1;
  config.optimizer.lr_schedule.base_lr = 1e-3;
  config.optimizer.lr_schedule.steps_per_epoch = 1000;
  ASSERT_TRUE(core.Configure(config).ok());
  const std::vector<float> grad(1 << 20, 0.5f);
  ASSERT_TRUE(core.AddPart({0, 0}, std::vector<float>(grad.size(), 1.0f)).ok());
  ShardService service(&core);
  auto server = StartServer("127.0.0.1", 0, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Shard::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", server->port)));
  v1::PartBatch push;
  const size_t before = ResidentBytes();

  std::atomic<int> flooded{0};
  grpc::ClientContext flood_context;
  auto flood = stub->PushPull(&flood_context);
  std::thread flooder([&] {
    v1::PartBatch m;
    EncodePart({0, 0}, 0, 1, grad, OnlyPart(&m));
    while (flood->Write(m)) ++flooded;
  });
  // Oversized (past the 16 MiB message limit) and malformed: refused, each on its stream.
  for (bool oversized : {true, false}) {
    grpc::ClientContext context;
    auto stream = stub->PushPull(&context);
    v1::PartBatch m;
    if (oversized) {
      EncodePart({0, 0}, 0, 1, std::vector<float>(5 << 20, 1.0f), OnlyPart(&m));
    } else {
      EncodePart({0, 0}, 0, 1, grad, OnlyPart(&m));
      m.mutable_parts(0)->mutable_header()->set_bytes(12);  // says otherwise than its data
    }
    stream->Write(m);
    stream->WritesDone();
    v1::PartBatch answer;
    while (stream->Read(&answer)) {
    }
    EXPECT_FALSE(stream->Finish().ok()) << (oversized ? "oversized" : "malformed");
  }
  // The other worker trains on, and the shard's memory stays bounded meanwhile.
  size_t peak = 0;
  grpc::ClientContext context;
  auto worker = stub->PushPull(&context);
  int64_t version = 0;
  for (int step = 0; step < 40; ++step) {
    EncodePart({0, 0}, version, 0, grad, OnlyPart(&push));
    ASSERT_TRUE(worker->Write(push)) << "step " << step;
    v1::PartBatch answer;
    ASSERT_TRUE(worker->Read(&answer)) << "step " << step;
    version = answer.parts(0).header().version();
    peak = std::max(peak, ResidentBytes());
  }
  worker->WritesDone();
  EXPECT_GT(flooded.load(), 16) << "the flooder wrote past the 64 MiB of queued answers";
  const size_t growth = peak > before ? peak - before : 0;
  std::printf("resident memory grew %.0f MiB while the flooder wrote %d pushes of 4 MiB\n",
              growth / 1048576.0, flooded.load());
  EXPECT_LT(growth, size_t{300} << 20);
  flood_context.TryCancel();
  flooder.join();
  context.TryCancel();
  server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace cohort
