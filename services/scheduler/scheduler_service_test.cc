// The scheduler's gRPC adapter over a real core, on a loopback port: what each call carries
// into the core and back out, and how errors become gRPC statuses.

#include "services/scheduler/scheduler_service.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/common/fake_clock.h"
#include "services/common/grpc_util.h"

namespace cohort {
namespace {

class SchedulerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobSpec spec;
    spec.job_id = "job-service-test";
    spec.num_workers = 1;
    spec.num_shards = 1;
    spec.mode = KVStoreMode::kDistAsync;
    core_ = std::make_unique<SchedulerCore>(spec, &clock_);
    service_ = std::make_unique<SchedulerService>(core_.get());
    auto server = StartServer("127.0.0.1", 0, {service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = v1::Scheduler::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", server_.port)));
  }
  void TearDown() override { server_.Shutdown(); }

  grpc::Status Register(v1::Role role, int port, v1::RegisterReply* reply,
                        const std::string& advertise = "", const std::string& host = "host-a",
                        int rank = -1) {
    v1::RegisterRequest request;
    request.set_role(role);
    request.set_requested_rank(rank);
    request.set_host(host);
    request.set_pid(42);
    request.set_port(port);
    request.set_advertise_address(advertise);
    grpc::ClientContext context;
    return stub_->Register(&context, request, reply);
  }

  FakeClock clock_;
  std::unique_ptr<SchedulerCore> core_;
  std::unique_ptr<SchedulerService> service_;
  RunningServer server_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

TEST_F(SchedulerServiceTest, RegistrationCarriesTheJobAndTheShardsReachableAddress) {
  v1::RegisterReply shard, worker;
  ASSERT_TRUE(Register(v1::SHARD, 7001, &shard).ok());
  EXPECT_EQ(shard.job_id(), "job-service-test");
  EXPECT_EQ(shard.rank(), 0);
  EXPECT_EQ(shard.num_workers(), 1);
  EXPECT_EQ(shard.num_shards(), 1);
  EXPECT_EQ(shard.mode(), "dist_async");
  ASSERT_TRUE(Register(v1::WORKER, 0, &worker).ok());
  EXPECT_EQ(worker.rank(), 0);

  v1::ClusterSpecRequest request;
  request.set_role(v1::WORKER);
  grpc::ClientContext context;
  v1::ClusterSpec spec;
  ASSERT_TRUE(stub_->GetClusterSpec(&context, request, &spec).ok());
  EXPECT_EQ(spec.mode(), "dist_async");
  ASSERT_EQ(spec.shard_addresses_size(), 1);
  // Where the scheduler saw the shard come from, with the port it listens on.
  EXPECT_EQ(spec.shard_addresses(0), "127.0.0.1:7001");
}

// Newlines, ANSI escapes, NUL and 10 KB from a peer: escaped and cut before the scheduler
// logs them or puts them in /status.
TEST_F(SchedulerServiceTest, HostileWordsOfAPeerAreEscapedBeforeTheyAreLoggedOrShown) {
  const std::string forged = std::string("e\nscheduler: job DONE: all 2 workers finished\x1b[2J") +
                             std::string(1, '\0') + std::string(10240, 'x');
  v1::RegisterReply reply;
  ASSERT_TRUE(Register(v1::SHARD, 7001, &reply, "", forged).ok());
  // A second shard: the job has one, so it is refused, and the refusal is logged.
  testing::internal::CaptureStderr();
  const grpc::Status extra = Register(v1::SHARD, 7002, &reply, "", forged, 1);
  const std::string refused = testing::internal::GetCapturedStderr();
  EXPECT_EQ(extra.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StartsWith(refused, "scheduler: refused the registration of a shard as rank 1 "
                                        "from ipv4:127.0.0.1:"))
      << refused;
  EXPECT_TRUE(absl::StrContains(refused, "(host e\\nscheduler: job DONE")) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "ranks 0..0")) << refused;
  EXPECT_EQ(std::count(refused.begin(), refused.end(), '\n'), 1) << refused;
  ASSERT_TRUE(Register(v1::WORKER, 0, &reply, "", forged).ok());  // the shard's host: loopback


  v1::StopRequest stop;
  stop.set_role(v1::WORKER);
  stop.set_rank(0);
  stop.set_error(forged);
  grpc::ClientContext context;
  v1::StopReply stopped;
  ASSERT_TRUE(stub_->Stop(&context, stop, &stopped).ok());
  for (const std::string& shown : {core_->reason(), core_->StatusJson()}) {
    EXPECT_EQ(shown.find('\n'), std::string::npos) << shown;
    EXPECT_EQ(shown.find('\x1b'), std::string::npos) << shown;
    EXPECT_EQ(shown.find('\0'), std::string::npos) << shown;
    EXPECT_LT(shown.size(), 6000u);
  }
  EXPECT_TRUE(absl::StrContains(core_->reason(), "e\\nscheduler: job DONE")) << core_->reason();
  // An advertised address is dialled by the workers: one that is not an address is refused.
  EXPECT_EQ(Register(v1::SHARD, 7003, &reply, "evil\nhost:1").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(SchedulerServiceTest, AnAdvertisedAddressWithAPortIsTakenAsItIs) {
  v1::RegisterReply reply;
  ASSERT_TRUE(Register(v1::SHARD, 7002, &reply, "gateway.example:30002").ok());
  ASSERT_TRUE(Register(v1::WORKER, 0, &reply).ok());
  grpc::ClientContext context;
  v1::ClusterSpec spec;
  ASSERT_TRUE(stub_->GetClusterSpec(&context, v1::ClusterSpecRequest(), &spec).ok());
  EXPECT_EQ(spec.shard_addresses(0), "gateway.example:30002");
}

TEST_F(SchedulerServiceTest, AnAdvertisedHostWinsOverThePeerAddress) {
  v1::RegisterReply reply;
  ASSERT_TRUE(Register(v1::SHARD, 7002, &reply, "shard0.example").ok());
  ASSERT_TRUE(Register(v1::WORKER, 0, &reply).ok());
  grpc::ClientContext context;
  v1::ClusterSpec spec;
  ASSERT_TRUE(stub_->GetClusterSpec(&context, v1::ClusterSpecRequest(), &spec).ok());
  EXPECT_EQ(spec.shard_addresses(0), "shard0.example:7002");
}

TEST_F(SchedulerServiceTest, AShardWithoutAPortIsRefusedNamingWhatToPass) {
  v1::RegisterReply reply;
  const grpc::Status status = Register(v1::SHARD, 0, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "pass --advertise_address"))
      << status.error_message();
}

TEST_F(SchedulerServiceTest, AnUnknownRoleAndATakenRankAreRefusedAsTheCoreSays) {
  v1::RegisterReply reply;
  EXPECT_EQ(Register(v1::ROLE_UNSPECIFIED, 0, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Register(v1::WORKER, 0, &reply).ok());
  const grpc::Status again = Register(v1::WORKER, 0, &reply);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << again.error_message();
}

TEST_F(SchedulerServiceTest, HeartbeatsAreAnsweredWithTheJobStateAndItsEndIsToldAtOnce) {
  v1::RegisterReply reply;
  ASSERT_TRUE(Register(v1::SHARD, 7003, &reply).ok());
  ASSERT_TRUE(Register(v1::WORKER, 0, &reply).ok());
  grpc::ClientContext context;
  auto stream = stub_->Control(&context);
  v1::Heartbeat heartbeat;
  heartbeat.set_role(v1::WORKER);
  heartbeat.set_rank(0);
  heartbeat.mutable_progress()->set_step(12);
  heartbeat.mutable_progress()->set_images_per_second(345);
  ASSERT_TRUE(stream->Write(heartbeat));
  v1::ControlMessage answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.state(), v1::RUNNING);
  // The progress reached the core: the status page shows it.
  EXPECT_TRUE(absl::StrContains(core_->StatusJson(), "\"step\":12")) << core_->StatusJson();

  v1::StopRequest stop;
  stop.set_role(v1::WORKER);
  stop.set_rank(0);
  stop.set_error("out of memory on host-a");
  grpc::ClientContext stop_context;
  v1::StopReply stopped;
  ASSERT_TRUE(stub_->Stop(&stop_context, stop, &stopped).ok());
  // The end is written at once, before any heartbeat asks.
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(answer.reason(), "out of memory on host-a")) << answer.reason();
  // And a heartbeat's answer says it again.
  ASSERT_TRUE(stream->Write(heartbeat));
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(answer.reason(), "out of memory on host-a")) << answer.reason();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(SchedulerServiceTest, ABarrierReturnsTheAgreedFingerprint) {
  v1::RegisterReply reply;
  ASSERT_TRUE(Register(v1::SHARD, 7004, &reply).ok());
  ASSERT_TRUE(Register(v1::WORKER, 0, &reply).ok());
  v1::BarrierRequest request;
  request.set_rank(0);
  request.set_name("kvstore init");
  request.set_partition_fingerprint(0xfeed);
  grpc::ClientContext context;
  v1::BarrierReply agreed;
  ASSERT_TRUE(stub_->Barrier(&context, request, &agreed).ok());
  EXPECT_EQ(agreed.partition_fingerprint(), 0xfeedu);
  // A plain barrier's reply carries no payloads (an exchange's carries every worker's).
  EXPECT_EQ(agreed.payloads_size(), 0);

  request.set_name("user exchange");
  request.set_exchange(true);
  request.set_payload("bytes of rank 0");
  grpc::ClientContext exchange_context;
  v1::BarrierReply exchanged;
  ASSERT_TRUE(stub_->Barrier(&exchange_context, request, &exchanged).ok());
  ASSERT_EQ(exchanged.payloads_size(), 1);
  EXPECT_EQ(exchanged.payloads(0), "bytes of rank 0");
}

}  // namespace
}  // namespace cohort
