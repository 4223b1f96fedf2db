// The membership client over gRPC against a scheduler service in this process (loopback): joining,
// the cluster spec, barriers, leaving, learning of the job's end, and a scheduler that is not there.

#include "services/membership/member_session.h"

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/common/clock.h"
#include "proto/shard.grpc.pb.h"
#include "services/common/grpc_util.h"
#include "services/common/job_certs_testing.h"
#include "services/common/test_tmp_dir.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_service.h"

namespace cohort {
namespace {

class MemberSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobSpec spec;
    spec.job_id = "job-session-test";
    spec.num_workers = 2;
    spec.num_shards = 1;
    Start(spec);
  }
  // A scheduler for `spec` in place of the one running.
  void Start(const JobSpec& spec) {
    if (service_ != nullptr) server_.Shutdown();
    core_ = std::make_unique<SchedulerCore>(spec, &clock_);
    service_ = std::make_unique<SchedulerService>(core_.get());
    auto server = StartServer("127.0.0.1", 0, {service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override { server_.Shutdown(); }

  MemberSessionOptions Options(v1::Role role, int rank) const {
    MemberSessionOptions o;
    o.scheduler_address = absl::StrCat("127.0.0.1:", server_.port);
    o.role = role;
    o.requested_rank = rank;
    o.port = role == v1::SHARD ? 7100 : 0;
    o.connect_timeout = absl::Seconds(10);
    o.heartbeat_interval = absl::Milliseconds(20);
    return o;
  }
  std::unique_ptr<MemberSession> Join(v1::Role role, int rank, std::string host_key = "") {
    MemberSessionOptions o = Options(role, rank);
    o.host_key = std::move(host_key);
    auto session = MemberSession::Join(o);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  RealClock clock_;
  std::unique_ptr<SchedulerCore> core_;
  std::unique_ptr<SchedulerService> service_;
  RunningServer server_;
};

TEST_F(MemberSessionTest, MembersJoinMeetAtBarriersAndLeaveAJobThatEndsDone) {
  auto shard = Join(v1::SHARD, 0);
  auto w0 = Join(v1::WORKER, 0);
  auto w1 = Join(v1::WORKER, 1);
  ASSERT_TRUE(shard && w0 && w1);
  EXPECT_EQ(w1->rank(), 1);
  EXPECT_EQ(w1->num_workers(), 2);
  EXPECT_EQ(w1->num_shards(), 1);
  EXPECT_EQ(w1->job_id(), "job-session-test");
  EXPECT_EQ(w1->mode(), "dist_sync");
  EXPECT_EQ(w1->name(), "worker 1");
  auto cluster = w0->WaitForShards();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(cluster->addresses, std::vector<std::string>{"127.0.0.1:7100"});
  ASSERT_EQ(cluster->incarnations.size(), 1u);
  EXPECT_EQ(cluster->restart_grace, absl::ZeroDuration());

  absl::StatusOr<uint64_t> other;
  std::thread t([&] { other = w1->Barrier("kvstore init", 99); });
  const absl::StatusOr<uint64_t> mine = w0->Barrier("kvstore init", 99);
  t.join();
  ASSERT_TRUE(mine.ok() && other.ok()) << mine.status() << " " << other.status();
  EXPECT_EQ(*mine, 99u);

  w0->Leave(absl::OkStatus());
  w1->Leave(absl::OkStatus());
  EXPECT_EQ(core_->state(), JobState::kDone);
  // The shard hears it on its control stream.
  ASSERT_TRUE(shard->WaitUntilEnded(absl::Seconds(10)));
  EXPECT_TRUE(shard->end_status().ok()) << shard->end_status();
  shard->Leave(absl::OkStatus());
}

TEST_F(MemberSessionTest, AFailingMemberEndsTheJobForTheOthersWithItsReason) {
  auto shard = Join(v1::SHARD, 0);
  auto w0 = Join(v1::WORKER, 0);
  auto w1 = Join(v1::WORKER, 1);
  ASSERT_TRUE(shard && w0 && w1);
  int calls = 0;
  w0->OnEnd([&] { ++calls; });
  w1->Leave(absl::InternalError("the loss is NaN at step 7"));
  ASSERT_TRUE(w0->WaitUntilEnded(absl::Seconds(10)));
  EXPECT_EQ(w0->end_status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(w0->end_status().message(), "the loss is NaN at step 7"))
      << w0->end_status();
  EXPECT_EQ(calls, 1);
  w0->Leave(absl::OkStatus());
  shard->Leave(absl::OkStatus());
}

// The job's end is written to every member's control stream at once, not in the answer to its
// next heartbeat: members that beat every 30 s hear it within a second.
TEST_F(MemberSessionTest, MembersHearTheJobsEndAtOnceNotAtTheirNextHeartbeat) {
  std::vector<std::unique_ptr<MemberSession>> members;
  for (auto [role, rank] : {std::pair{v1::SHARD, 0}, {v1::WORKER, 0}, {v1::WORKER, 1}}) {
    MemberSessionOptions o = Options(role, rank);
    o.heartbeat_interval = absl::Seconds(30);
    o.scheduler_grace = absl::Seconds(60);
    auto session = MemberSession::Join(o);
    ASSERT_TRUE(session.ok()) << session.status();
    members.push_back(*std::move(session));
  }
  absl::SleepFor(absl::Milliseconds(200));  // each has sent its first heartbeat and had its answer
  core_->Stop("the scheduler was stopped by SIGTERM");
  for (const auto& m : members) {
    ASSERT_TRUE(m->WaitUntilEnded(absl::Seconds(1))) << m->name();
    EXPECT_TRUE(absl::StrContains(m->end_status().message(), "stopped by SIGTERM"))
        << m->end_status();
  }
  for (const auto& m : members) m->Leave(absl::OkStatus());
}

// What member_sim's killed worker does: to the scheduler it died, unannounced.
TEST_F(MemberSessionTest, AVanishedMemberIsTakenForDeadAtOnce) {
  auto shard = Join(v1::SHARD, 0);
  auto w0 = Join(v1::WORKER, 0);
  auto w1 = Join(v1::WORKER, 1);
  ASSERT_TRUE(shard && w0 && w1);
  absl::SleepFor(absl::Milliseconds(200));  // ten heartbeats: its control stream is open
  w1->Vanish();
  ASSERT_TRUE(w0->WaitUntilEnded(absl::Seconds(10)));
  EXPECT_TRUE(absl::StrContains(w0->end_status().message(),
                                "worker 1 (host ")) << w0->end_status();
  EXPECT_TRUE(absl::StrContains(w0->end_status().message(), "without a stop"))
      << w0->end_status();
  w1->Leave(absl::OkStatus());  // nothing: it is gone
  EXPECT_EQ(core_->state(), JobState::kFailed);
  w0->Leave(absl::OkStatus());
  shard->Leave(absl::OkStatus());
}

// Every worker calls Barrier(name) at once in its generation; their results, by worker.
std::vector<absl::StatusOr<uint64_t>> AllAtBarrier(
    const std::vector<MemberSession*>& workers, const std::string& name, uint64_t fingerprint) {
  std::vector<absl::StatusOr<uint64_t>> results(workers.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < workers.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = workers[i]->Barrier(name, fingerprint, workers[i]->generation());
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Two hosts of two workers: each host's workers meet there (sent by the scheduler, or told by
// the cluster spec) and one call a host is counted; a worker that dies while its host's leader
// waits for it there releases everyone into the next generation, where the rest meet again.
TEST_F(MemberSessionTest, AHostsWorkersMeetThereAndOneCallArrivesForThemAll) {
  JobSpec spec;
  spec.job_id = "job-host-meetings";
  spec.num_workers = 4;
  spec.num_shards = 1;
  spec.elastic = true;
  spec.min_workers = 1;
  Start(spec);
  auto shard = Join(v1::SHARD, 0);
  std::vector<std::unique_ptr<MemberSession>> sessions;
  for (int w = 0; w < 4; ++w) {
    sessions.push_back(Join(v1::WORKER, w, w < 2 ? "simulated host a" : "simulated host b"));
    ASSERT_TRUE(sessions.back());
  }
  std::vector<MemberSession*> workers;
  for (auto& s : sessions) workers.push_back(s.get());
  for (int round = 0; round < 3; ++round) {
    for (const auto& r : AllAtBarrier(workers, absl::StrCat("round ", round), 42)) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(*r, 42u);
    }
  }
  SchedulerSnapshot counted = core_->TakeSnapshot();
  EXPECT_EQ(counted.barrier_arrivals, 12);
  EXPECT_EQ(counted.barrier_calls, 3 * 2);  // one a host

  // Worker 1 dies while worker 0, the leader of its host, waits there for it.
  std::vector<MemberSession*> rest = {workers[0], workers[2], workers[3]};
  std::vector<absl::StatusOr<uint64_t>> waited;
  std::thread waiting([&] { waited = AllAtBarrier(rest, "waiting", 0); });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(core_->TakeSnapshot().barrier_calls, counted.barrier_calls + 1);  // host b's
  workers[1]->Vanish();
  waiting.join();
  for (const auto& r : waited) {
    EXPECT_EQ(ChangedGeneration(r.status()), 1) << r.status();
  }
  for (MemberSession* w : rest) {
    const absl::StatusOr<ShardsView> view = w->WaitForShards(absl::Seconds(10));
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->generation, 1);
  }
  for (int round = 0; round < 2; ++round) {
    for (const auto& r : AllAtBarrier(rest, absl::StrCat("after ", round), 0)) {
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }
  counted = core_->TakeSnapshot();
  // Waiting: host b's call; after: worker 0 alone and host b's one call.
  EXPECT_EQ(counted.barrier_calls, 6 + 1 + 2 * 2);
  for (MemberSession* w : rest) w->Leave(absl::OkStatus());
  shard->Leave(absl::OkStatus());
}

TEST_F(MemberSessionTest, JoiningASchedulerThatIsNotThereSaysWhereItLooked) {
  MemberSessionOptions o = Options(v1::WORKER, 0);
  server_.Shutdown();
  o.connect_timeout = absl::Milliseconds(300);
  auto session = MemberSession::Join(o);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kDeadlineExceeded) << session.status();
  EXPECT_TRUE(absl::StrContains(session.status().message(),
                                absl::StrCat("cannot join the job at scheduler ",
                                             o.scheduler_address, " as a worker")))
      << session.status();
  EXPECT_TRUE(absl::StrContains(session.status().message(), "is the scheduler running there?"))
      << session.status();
}

// A worker given another job's TLS folder, or none: it says so within seconds instead of
// waiting for the scheduler until --connect_timeout.
TEST_F(MemberSessionTest, AWorkerWithAnotherJobsTlsFilesFailsAtOnceSayingSo) {
  const std::string job = TmpDir() + "/job", other = TmpDir() + "/other";
  ASSERT_TRUE(MakeJobCerts(job, "scheduler").ok());
  ASSERT_TRUE(MakeJobCerts(other, "worker").ok());
  auto scheduler_security = LoadSecurity(job, "scheduler", "");
  ASSERT_TRUE(scheduler_security.ok()) << scheduler_security.status();
  auto server = StartServer("127.0.0.1", 0, {service_.get()}, **scheduler_security);
  ASSERT_TRUE(server.ok()) << server.status();
  MemberSessionOptions o = Options(v1::WORKER, 0);
  o.scheduler_address = absl::StrCat("127.0.0.1:", server->port);
  o.connect_timeout = absl::Seconds(60);
  auto security = LoadSecurity(other, "worker", "");
  ASSERT_TRUE(security.ok()) << security.status();
  o.security = *security;
  const absl::Time start = absl::Now();
  auto session = MemberSession::Join(o);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(session.ok());
  EXPECT_LT(took, absl::Seconds(5)) << session.status();
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnauthenticated) << session.status();
  EXPECT_TRUE(absl::StrContains(session.status().message(), "the TLS handshake failed"))
      << session.status();
  EXPECT_TRUE(absl::StrContains(session.status().message(), "is --tls_dir this job's?"))
      << session.status();
  // A plaintext member: the scheduler closes its every connection; said in seconds too.
  o.security = TransportSecurity::Plaintext();
  const absl::Time plain_start = absl::Now();
  auto plain = MemberSession::Join(o);
  ASSERT_FALSE(plain.ok());
  EXPECT_LT(absl::Now() - plain_start, absl::Seconds(10)) << plain.status();
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kUnauthenticated) << plain.status();
  EXPECT_TRUE(absl::StrContains(plain.status().message(), "give --tls_dir and --token_file"))
      << plain.status();
  server->Shutdown();
}

}  // namespace
}  // namespace cohort
