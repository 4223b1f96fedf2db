#include "tools/launch/job_env.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::IsSupersetOf;
using ::testing::Not;
using ::testing::StartsWith;

JobEnvSpec Spec(Role role, int rank) {
  JobEnvSpec s;
  s.job_id = "job-1";
  s.role = role;
  s.rank = rank;
  s.num_workers = 3;
  s.num_shards = 2;
  s.mode = "dist_sync";
  s.scheduler_address = "127.0.0.1:4242";
  s.cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  return s;
}

TEST(JobEnvironmentTest, WorkerLearnsTheJob) {
  const std::vector<std::string> env =
      JobEnvironment({"PATH=/bin", "HOME=/root"}, Spec(Role::kWorker, 2));
  EXPECT_THAT(
      env, IsSupersetOf({"PATH=/bin", "HOME=/root", "COHORT_JOB_ID=job-1", "COHORT_ROLE=worker",
                         "COHORT_RANK=2", "COHORT_NUM_WORKERS=3", "COHORT_NUM_SHARDS=2",
                         "COHORT_SCHEDULER=127.0.0.1:4242", "COHORT_MODE=dist_sync",
                         "COHORT_INSECURE=1", "OMP_NUM_THREADS=2",  // 8 cores / 3 workers
                         "COHORT_CPUS=4-5"}));
  // Threads that fit the cores keep OpenMP's own wait policy.
  EXPECT_THAT(env, Not(Contains(StartsWith("OMP_WAIT_POLICY="))));
}

// Threads that wait passively only where they would take cores from each other.
TEST(JobEnvironmentTest, PassiveWaitsWhereTheUsersThreadsOversubscribe) {
  const JobEnvSpec s = Spec(Role::kWorker, 0);  // 3 workers on 8 cores
  EXPECT_THAT(JobEnvironment({"OMP_NUM_THREADS=3"}, s), Contains("OMP_WAIT_POLICY=passive"));
  EXPECT_THAT(JobEnvironment({"OMP_NUM_THREADS=2"}, s),
              Not(Contains(StartsWith("OMP_WAIT_POLICY="))));
  JobEnvSpec remote = s;
  remote.cpus = {};  // another host: it divides its cores itself, unless the user set threads
  EXPECT_THAT(JobEnvironment({}, remote), Not(Contains(StartsWith("OMP_"))));
  EXPECT_THAT(JobEnvironment({"OMP_NUM_THREADS=1"}, remote), Contains("OMP_WAIT_POLICY=passive"));
}

TEST(JobEnvironmentTest, WhereToServeMetricsWhenSet) {
  JobEnvSpec s = Spec(Role::kWorker, 0);
  EXPECT_THAT(JobEnvironment({}, s), Not(Contains(StartsWith("COHORT_METRICS_"))));
  s.metrics_bind = "127.0.0.1";
  s.metrics_port_file = "/tmp/j/worker-0.metrics_port";
  EXPECT_THAT(JobEnvironment({}, s),
              IsSupersetOf({"COHORT_METRICS_BIND=127.0.0.1",
                            "COHORT_METRICS_PORT_FILE=/tmp/j/worker-0.metrics_port"}));
}

TEST(JobEnvironmentTest, SchedulerHasNoRankOrSchedulerAddressAndOneThread) {
  const std::vector<std::string> env = JobEnvironment({}, Spec(Role::kScheduler, 0));
  EXPECT_THAT(env, IsSupersetOf({"COHORT_ROLE=scheduler", "OMP_NUM_THREADS=1"}));
  EXPECT_THAT(env, Not(Contains(StartsWith("COHORT_RANK="))));
  EXPECT_THAT(env, Not(Contains(StartsWith("COHORT_SCHEDULER="))));
}

TEST(JobEnvironmentTest, ShardsGetOneThread) {
  EXPECT_THAT(JobEnvironment({}, Spec(Role::kShard, 1)),
              IsSupersetOf({"COHORT_ROLE=shard", "COHORT_RANK=1", "OMP_NUM_THREADS=1"}));
}

TEST(JobEnvironmentTest, WorkersGetAtLeastOneThread) {
  JobEnvSpec s = Spec(Role::kWorker, 0);
  s.cpus = {0, 1};
  s.num_workers = 4;
  EXPECT_THAT(JobEnvironment({}, s), Contains("OMP_NUM_THREADS=1"));
  // Two workers would share each core: none is confined.
  EXPECT_THAT(JobEnvironment({}, s), Not(Contains(StartsWith("COHORT_CPUS="))));
}

// Each worker's threads on a slice of the launcher's CPUs of their own, by rank; the user's
// thread count or CPU list wins.
TEST(JobEnvironmentTest, WorkersGetCoresOfTheirOwn) {
  JobEnvSpec s = Spec(Role::kWorker, 0);
  s.cpus = {2, 3, 5, 6, 7};
  s.num_workers = 2;
  EXPECT_THAT(JobEnvironment({}, s), Contains("COHORT_CPUS=2-3"));
  s.rank = 1;
  EXPECT_THAT(JobEnvironment({}, s), Contains("COHORT_CPUS=5-6"));
  s.rank = 3;  // a worker joining an elastic job takes its rank's turn
  EXPECT_THAT(JobEnvironment({}, s), Contains("COHORT_CPUS=5-6"));
  EXPECT_THAT(JobEnvironment({"COHORT_CPUS=7"}, s), AllOf(Contains("COHORT_CPUS=7"),
                                                          Not(Contains("COHORT_CPUS=5-6"))));
  EXPECT_THAT(JobEnvironment({"OMP_NUM_THREADS=2"}, s),
              Not(Contains(StartsWith("COHORT_CPUS="))));
  EXPECT_THAT(JobEnvironment({}, Spec(Role::kShard, 0)),
              Not(Contains(StartsWith("COHORT_CPUS="))));
}

TEST(JobEnvironmentTest, KeepsTheUsersOpenMpSettings) {
  const std::vector<std::string> env =
      JobEnvironment({"OMP_NUM_THREADS=7", "OMP_WAIT_POLICY=active"}, Spec(Role::kWorker, 0));
  EXPECT_THAT(env, Contains("OMP_NUM_THREADS=7"));
  EXPECT_THAT(env, Contains("OMP_WAIT_POLICY=active"));
  EXPECT_THAT(env, Not(Contains("OMP_NUM_THREADS=2")));
  EXPECT_THAT(env, Not(Contains("OMP_WAIT_POLICY=passive")));
}

TEST(JobEnvironmentTest, TlsFilesInsteadOfInsecureWhenTheJobHasThem) {
  JobEnvSpec s = Spec(Role::kWorker, 0);
  s.tls_dir = "/run/job/tls";
  s.token_file = "/run/job/token";
  const std::vector<std::string> env = JobEnvironment({"COHORT_INSECURE=1"}, s);
  EXPECT_THAT(env, IsSupersetOf({"COHORT_TLS_DIR=/run/job/tls",
                                 "COHORT_TOKEN_FILE=/run/job/token"}));
  EXPECT_THAT(env, Not(Contains(StartsWith("COHORT_INSECURE"))));
  s.tls_dir = s.token_file = "";
  EXPECT_THAT(JobEnvironment({"COHORT_TLS_DIR=/old"}, s),
              Not(Contains(StartsWith("COHORT_TLS_DIR"))));
}

TEST(JobEnvironmentTest, RemoteWorkersLeaveTheirThreadsToTheirHost) {
  JobEnvSpec s = Spec(Role::kWorker, 0);
  s.cpus = {};
  EXPECT_THAT(JobEnvironment({}, s), Not(Contains(StartsWith("OMP_NUM_THREADS="))));
  EXPECT_THAT(JobEnvironment({}, s), Not(Contains(StartsWith("COHORT_CPUS="))));
}

TEST(JobEnvironmentTest, RemoteEnvironmentCarriesTheJobOpenMpAndForwardedNames) {
  EXPECT_THAT(RemoteEnvironment({"PATH=/bin", "COHORT_RANK=1", "OMP_NUM_THREADS=1", "HOME=/r",
                                 "NCCL_DEBUG=INFO", "NCCL_DEBUG_X=1"},
                                {"NCCL_DEBUG"}),
              ::testing::ElementsAre("COHORT_RANK=1", "OMP_NUM_THREADS=1", "NCCL_DEBUG=INFO"));
}

TEST(JobEnvironmentTest, ReplacesInheritedJobVariables) {
  // A launcher started from inside another job must not hand that job's identity down.
  const std::vector<std::string> env = JobEnvironment(
      {"COHORT_JOB_ID=outer", "COHORT_RANK=9", "COHORT_OTHER=kept"}, Spec(Role::kWorker, 1));
  EXPECT_THAT(env, Contains("COHORT_JOB_ID=job-1"));
  EXPECT_THAT(env, Contains("COHORT_RANK=1"));
  EXPECT_THAT(env, Contains("COHORT_OTHER=kept"));
  EXPECT_THAT(env, Not(Contains("COHORT_JOB_ID=outer")));
  EXPECT_THAT(env, Not(Contains("COHORT_RANK=9")));
}

}  // namespace
}  // namespace cohort::launch
