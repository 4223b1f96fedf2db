#include "tools/launch/member_commands.h"

#include <algorithm>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

LaunchOptions Local() {
  LaunchOptions o;
  o.scheduler.num_workers = 2;
  o.scheduler.num_shards = 2;
  o.scheduler.job_id = "job-m";
  o.scheduler_binary = "/bin/scheduler";
  o.shard_binary = "/bin/shard";
  o.worker_program = "/bin/worker";
  o.worker_argv = {"/bin/worker", "--model=lenet"};
  o.checkpoints.checkpoint_dir = "/ckpt";
  o.checkpoints.checkpoint_every = 5;
  o.environment = {"PATH=/usr/bin"};
  o.working_dir = "/home/u";
  o.cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  return o;
}

// Two hosts: the scheduler and shard 0 on the first, shard 1 and both workers on the second.
LaunchOptions OnHosts() {
  LaunchOptions o = Local();
  o.hosts = {{"user@node1", 1}, {"node2", 2}};
  o.placement.scheduler = 0;
  o.placement.shards = {0, 1};
  o.placement.workers = {1, 1};
  o.tls = true;
  o.tls_dir = "/scratch/tls";
  o.token_file = "/scratch/token";
  return o;
}

TEST(MemberCommandsTest, SchedulerFlags) {
  LaunchOptions o = Local();
  EXPECT_THAT(SchedulerArgv(o, 0),
              ElementsAre("/bin/scheduler", "--port=0", "--num_workers=2", "--num_shards=2",
                          "--mode=dist_sync", "--linger=0", "--job_id=job-m",
                          "--baseline_images_per_second=0"));
  o.scheduler.shard_restart_grace_s = 60;  // --restart_failed_shards
  o.scheduler.on_worker_failure = "elastic";
  o.scheduler.min_workers = 1;
  const std::vector<std::string> argv = SchedulerArgv(o, 9000);
  EXPECT_EQ(argv[1], "--port=9000");
  EXPECT_THAT(argv, Contains("--shard_restart_grace=60"));
  EXPECT_THAT(argv, Contains("--on_worker_failure=elastic"));
  EXPECT_THAT(argv, Contains("--max_workers=2"));  // 0: -n
}

TEST(MemberCommandsTest, ShardFlagsAndItsResume) {
  const LaunchOptions o = Local();
  EXPECT_THAT(ShardArgv(o, "127.0.0.1:9000", 1, false),
              ElementsAre("/bin/shard", "--scheduler=127.0.0.1:9000", "--rank=1",
                          "--checkpoint_dir=/ckpt", "--checkpoint_every=5",
                          "--checkpoint_keep=3"));
  EXPECT_THAT(ShardArgv(o, "127.0.0.1:9000", 1, true), Contains("--resume=/ckpt"));
}

// A shard restarted in a job that itself resumed from another folder resumes once, from where
// the job checkpoints now.
TEST(MemberCommandsTest, ARestartedShardGetsOneResume) {
  LaunchOptions o = Local();
  o.checkpoints.resume = "/old";
  const std::vector<std::string> argv = ShardArgv(o, "127.0.0.1:9000", 1, true);
  EXPECT_EQ(std::count_if(argv.begin(), argv.end(),
                          [](const std::string& a) { return a.rfind("--resume=", 0) == 0; }),
            1);
  EXPECT_THAT(argv, Contains("--resume=/ckpt"));
}

TEST(MemberCommandsTest, ALocalSchedulerListensOnLoopbackInPlaintext) {
  const LaunchOptions o = Local();
  const MemberCommand c =
      MemberCommandOf(o, "/scratch", "", Role::kScheduler, 0, o.scheduler_binary, {"/bin/s"});
  EXPECT_EQ(c.host, "");
  EXPECT_THAT(c.run_dir_files, IsEmpty());
  EXPECT_EQ(c.spawn.path, "/bin/scheduler");
  EXPECT_THAT(c.spawn.argv,
              ElementsAre("/bin/s", "--bind=127.0.0.1",
                          "--metrics_port_file=/scratch/scheduler-0-metrics.port", "--insecure",
                          "--port_file=/scratch/scheduler.port",
                          "--journal=/scratch/scheduler.journal"));
  EXPECT_EQ(c.spawn.working_dir, "/home/u");
  EXPECT_FALSE(c.spawn.stdin_pipe);
  EXPECT_THAT(c.spawn.env, Contains("COHORT_ROLE=scheduler"));
  EXPECT_THAT(c.spawn.env, Contains("COHORT_JOB_ID=job-m"));
}

TEST(MemberCommandsTest, ALocalWorkerLearnsTheJobFromItsEnvironmentOnly) {
  const LaunchOptions o = Local();
  const MemberCommand c = MemberCommandOf(o, "/scratch", "127.0.0.1:9000", Role::kWorker, 1,
                                          o.worker_program, o.worker_argv);
  EXPECT_EQ(c.spawn.argv, o.worker_argv);
  EXPECT_THAT(c.spawn.env, Contains("COHORT_RANK=1"));
  EXPECT_THAT(c.spawn.env, Contains("COHORT_SCHEDULER=127.0.0.1:9000"));
  EXPECT_THAT(c.spawn.env, Contains("COHORT_METRICS_PORT_FILE=/scratch/worker-1-metrics.port"));
  EXPECT_THAT(c.spawn.env, Contains("OMP_NUM_THREADS=4"));  // 8 cores, 2 workers
}

TEST(MemberCommandsTest, ALocalShardWithTlsUsesTheJobsFiles) {
  LaunchOptions o = Local();
  o.tls = true;
  o.tls_dir = "/scratch/tls";
  o.token_file = "/scratch/token";
  const MemberCommand c = MemberCommandOf(o, "/scratch", "127.0.0.1:9000", Role::kShard, 0,
                                          o.shard_binary, ShardArgv(o, "127.0.0.1:9000", 0, false));
  EXPECT_THAT(c.spawn.argv, Contains("--tls_dir=/scratch/tls"));
  EXPECT_THAT(c.spawn.argv, Contains("--token_file=/scratch/token"));
  EXPECT_THAT(c.spawn.argv, Not(Contains("--insecure")));
  EXPECT_THAT(c.spawn.argv, Not(Contains(HasSubstr("--advertise_address"))));
}

TEST(MemberCommandsTest, ARemoteShardRunsUnderSshWithItsRunFolder) {
  const LaunchOptions o = OnHosts();
  EXPECT_EQ(HostOf(o, Role::kShard, 1), 1);
  EXPECT_EQ(HostOf(Local(), Role::kShard, 1), -1);
  EXPECT_EQ(RunFolderOf(o, "/scratch", Role::kShard, 1), "/tmp/cohort-job-m-shard-1");
  const MemberCommand c = MemberCommandOf(o, "/scratch", "node1:9000", Role::kShard, 1,
                                          o.shard_binary, ShardArgv(o, "node1:9000", 1, false));
  EXPECT_EQ(c.host, "node2");
  EXPECT_EQ(c.spawn.path, o.ssh.binary);
  EXPECT_TRUE(c.spawn.stdin_pipe);
  EXPECT_EQ(c.spawn.env, o.environment);
  // ssh's options, then "--": neither the host nor the command can be read as an option.
  ASSERT_GE(c.spawn.argv.size(), 3u);
  EXPECT_THAT(std::vector<std::string>(c.spawn.argv.end() - 3, c.spawn.argv.end() - 1),
              ElementsAre("--", "node2"));
  const std::string remote_command = c.spawn.argv.back();
  EXPECT_THAT(remote_command, HasSubstr("--bind=0.0.0.0"));
  EXPECT_THAT(remote_command, HasSubstr("--advertise_address=node2"));
  EXPECT_THAT(remote_command, HasSubstr("--tls_dir=/tmp/cohort-job-m-shard-1"));
  EXPECT_THAT(remote_command, HasSubstr("--token_file=/tmp/cohort-job-m-shard-1/token"));
  EXPECT_THAT(c.run_dir_files,
              ElementsAre(std::pair<std::string, std::string>{"ca.pem", "/scratch/tls/ca.pem"},
                          std::pair<std::string, std::string>{"shard.pem",
                                                              "/scratch/tls/shard.pem"},
                          std::pair<std::string, std::string>{"shard.key",
                                                              "/scratch/tls/shard.key"},
                          std::pair<std::string, std::string>{"token", "/scratch/token"}));
}

TEST(MemberCommandsTest, TheSchedulerOnAHostIsDialledAtItsAddress) {
  const LaunchOptions o = OnHosts();
  const MemberCommand c = MemberCommandOf(o, "/scratch", "", Role::kScheduler, 0,
                                          o.scheduler_binary, SchedulerArgv(o, 0));
  EXPECT_EQ(c.host, "node1");  // no user@
  EXPECT_THAT(c.spawn.argv.back(),
              HasSubstr("--port_file=/tmp/cohort-job-m-scheduler-0/scheduler.port"));
}

}  // namespace
}  // namespace cohort::launch
