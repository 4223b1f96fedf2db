#include "tools/launch/launch_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/durable_file.h"
#include "services/common/test_tmp_dir.h"
#include "tools/launch/restart_policy.h"

namespace cohort::launch {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

void WriteExecutable(const std::string& path, const std::string& script) {
  std::ofstream(path) << "#!/bin/sh\n" << script << "\n";
  chmod(path.c_str(), 0755);
}

// A launcher whose runfiles hold the role binaries (stand-ins) and make_job_certs.sh, run by
// `bazel run` from /home/user.
class LaunchConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runfiles_ = TmpDir() + "/launch.runfiles";
    for (const char* dir : {"", "/cohort", "/cohort/services", "/cohort/services/scheduler",
                            "/cohort/services/shard", "/cohort/services/worker", "/cohort/tools"}) {
      mkdir((runfiles_ + dir).c_str(), 0755);
    }
    for (const char* role : {"scheduler", "shard", "worker"}) {
      WriteExecutable(absl::StrCat(runfiles_, "/cohort/services/", role, "/", role), "exit 0");
    }
    WriteExecutable(runfiles_ + "/cohort/tools/make_job_certs.sh", "exit 0");
    launcher_.environment = {"PATH=/usr/bin:/bin", "BUILD_WORKING_DIRECTORY=/home/user",
                             "TMPDIR=/var/tmp"};
    launcher_.current_dir = "/runfiles/cohort";
    launcher_.runfiles_dirs = {"", runfiles_};
    launcher_.cpus = {0, 1, 2, 3, 4, 5};
    flags_.num_workers = 2;
  }

  absl::StatusOr<LaunchOptions> Options(std::vector<std::string> words = {"--model=lenet"}) {
    return OptionsFromFlags(flags_, words, launcher_);
  }
  // The usage error the flags make.
  std::string UsageError(std::vector<std::string> words = {"--model=lenet"}) {
    absl::StatusOr<LaunchOptions> o = Options(std::move(words));
    EXPECT_TRUE(absl::IsInvalidArgument(o.status())) << o.status();
    return std::string(o.status().message());
  }

  std::string runfiles_;
  LauncherProcess launcher_;
  LaunchFlags flags_;
};

TEST_F(LaunchConfigTest, ALocalJob) {
  flags_.num_shards = 3;
  flags_.job.job_id = "job-x";
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler.num_workers, 2);
  EXPECT_EQ(o->scheduler.num_shards, 3);
  EXPECT_EQ(o->scheduler.job_id, "job-x");
  EXPECT_EQ(o->working_dir, "/home/user");
  EXPECT_EQ(o->scheduler_binary, runfiles_ + "/cohort/services/scheduler/scheduler");
  EXPECT_EQ(o->worker_program, runfiles_ + "/cohort/services/worker/worker");
  EXPECT_THAT(o->worker_argv, ElementsAre(o->worker_program, "--model=lenet"));
  EXPECT_FALSE(o->tls);
  EXPECT_TRUE(o->hosts.empty());
  EXPECT_EQ(o->environment, launcher_.environment);
  EXPECT_EQ(o->cpus, launcher_.cpus);
  EXPECT_EQ(o->temp_root, "/var/tmp");
}

TEST_F(LaunchConfigTest, TheShardsDefaultToTheWorkersAndTheIdIsMade) {
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler.num_shards, 2);
  EXPECT_THAT(o->scheduler.job_id, StartsWith("job-"));
}

TEST_F(LaunchConfigTest, PathsAreTheUsers) {
  flags_.checkpoints.checkpoint_dir = "ckpt";
  flags_.checkpoints.checkpoint_every = 10;
  flags_.metrics_targets = "targets.json";
  flags_.restart_failed_shards = true;
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->checkpoints.checkpoint_dir, "/home/user/ckpt");
  EXPECT_EQ(o->checkpoints.checkpoint_every, 10);
  EXPECT_EQ(o->scheduler.shard_restart_grace_s, 60);
  EXPECT_EQ(o->scheduler.max_shard_restarts, kMaxShardRestarts);
  EXPECT_EQ(o->metrics_targets, "/home/user/targets.json");
  EXPECT_TRUE(o->restart_failed_shards);
}

TEST_F(LaunchConfigTest, TheJobPageGoesBesideTheModel) {
  absl::StatusOr<LaunchOptions> o = Options({"--model=lenet", "--output=runs/a/model.safetensors"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler.report_file, absl::StrCat("/home/user/runs/a/", o->scheduler.job_id, ".html"));
  EXPECT_THAT(o->scheduler.ToArgs(), Contains("--report_file=" + o->scheduler.report_file));
  o = Options({"--model=lenet", "--output", "/data/m.safetensors"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler.report_file, absl::StrCat("/data/", o->scheduler.job_id, ".html"));
  o = Options();  // the model in the working folder
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler.report_file, absl::StrCat("/home/user/", o->scheduler.job_id, ".html"));
  flags_.job.report_file = "page.html";  // or where the user says
  o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler.report_file, "/home/user/page.html");
}

TEST_F(LaunchConfigTest, ARestartedShardResumesWhereTheJobResumedFrom) {
  flags_.checkpoints.resume = "/old";
  flags_.checkpoints.checkpoint_every = 5;
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->checkpoints.folder(), "/old");
  EXPECT_EQ(o->checkpoints.resume, "/old");
}

// The flags the launcher shares with the scheduler and the shards: whatever value the role
// refuses, the launcher refuses before it starts anything, and with the role's words; whatever
// the role takes, the launcher takes (checkpoints on, so that the launcher's own rules for
// elastic jobs hold).
TEST_F(LaunchConfigTest, TheLauncherAcceptsAndRefusesWhatTheRolesDo) {
  const auto with = [](auto change) { return change; };
  const std::vector<std::function<void(LaunchFlags&)>> cases = {
      with([](LaunchFlags& f) {}),
      with([](LaunchFlags& f) { f.job.mode = "dist_async"; }),
      with([](LaunchFlags& f) { f.job.mode = "local"; }),
      with([](LaunchFlags& f) { f.job.mode = "sync"; }),
      with([](LaunchFlags& f) { f.job.job_id = "job.1_a-b"; }),
      with([](LaunchFlags& f) { f.job.job_id = "a/b"; }),
      with([](LaunchFlags& f) { f.job.linger_s = 2.5; }),
      with([](LaunchFlags& f) { f.job.linger_s = -1; }),
      with([](LaunchFlags& f) { f.job.baseline_images_per_second = -3; }),
      with([](LaunchFlags& f) { f.job.on_worker_failure = "elastic"; }),
      with([](LaunchFlags& f) { f.job.on_worker_failure = "retry"; }),
      with([](LaunchFlags& f) {
        f.job.on_worker_failure = "elastic";
        f.job.min_workers = 3;
      }),
      with([](LaunchFlags& f) {
        f.job.on_worker_failure = "elastic";
        f.job.max_workers = 1;
      }),
      with([](LaunchFlags& f) {
        f.job.on_worker_failure = "elastic";
        f.job.min_workers = 2;
        f.job.max_workers = 4;
      }),
      with([](LaunchFlags& f) { f.checkpoints.checkpoint_keep = 0; }),
      with([](LaunchFlags& f) { f.checkpoints.checkpoint_every = -1; }),
      with([](LaunchFlags& f) {
        f.checkpoints.checkpoint_dir = "";
        f.checkpoints.resume = "old";
      }),
      with([](LaunchFlags& f) {
        f.checkpoints.checkpoint_dir = "";
        f.checkpoints.resume = "";
      }),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    flags_ = LaunchFlags();
    flags_.num_workers = 2;
    flags_.checkpoints.checkpoint_dir = "ckpt";
    flags_.checkpoints.checkpoint_every = 10;
    cases[i](flags_);
    // What the scheduler and a shard make of the same values.
    SchedulerOptions scheduler = flags_.job;
    scheduler.num_workers = 2;
    scheduler.num_shards = 2;
    const absl::Status role = scheduler.ToJobSpec().ok() ? flags_.checkpoints.Validate()
                                                         : scheduler.ToJobSpec().status();
    const absl::Status launcher = Options().status();
    EXPECT_EQ(launcher.ok(), role.ok()) << "launcher: " << launcher << "; role: " << role;
    if (!role.ok()) {
      EXPECT_EQ(launcher.message(), role.message());
    }
  }
}

TEST_F(LaunchConfigTest, UsageErrorsInTheOrderTheyAreChecked) {
  flags_.launcher = "mpi";
  EXPECT_EQ(UsageError(), "unknown --launcher 'mpi'; use local or ssh");
  flags_.launcher = "ssh";
  EXPECT_THAT(UsageError(), StartsWith("--launcher ssh needs the hosts"));
  flags_.launcher = "";
  flags_.scheduler_host = "a";
  EXPECT_THAT(UsageError(), StartsWith("--scheduler_host and --shard_hosts place processes"));
  flags_.scheduler_host = "";
  flags_.checkpoints.checkpoint_every = 5;
  EXPECT_THAT(UsageError(), StartsWith("--checkpoint_every needs the folder"));
  flags_.checkpoints.checkpoint_every = 0;
  flags_.restart_failed_shards = true;
  flags_.num_shards = 2;
  flags_.num_shards.reset();
  EXPECT_THAT(UsageError(), StartsWith("--restart_failed_shards restarts a shard from its"));
  flags_.max_shard_restarts = 0;
  EXPECT_THAT(UsageError(), StartsWith("--max_shard_restarts=0: a shard rank is restarted"));
  flags_.max_shard_restarts = 3;
  flags_.restart_failed_shards = false;
  flags_.num_workers = 0;
  EXPECT_EQ(UsageError(), "give the number of workers with -n N (at least 1)");
  flags_.num_workers = 2;
  flags_.job.on_worker_failure = "elastic";
  flags_.job.min_workers = 3;
  EXPECT_THAT(UsageError(), HasSubstr("need 1 <= min_workers <= the number of workers (2) <= max_workers"));
  flags_.job.min_workers = 1;
  EXPECT_THAT(UsageError(), StartsWith("--on_worker_failure=elastic goes back to the shards'"));
  flags_.job.on_worker_failure = "fail";
  flags_.num_shards = 0;
  EXPECT_EQ(UsageError(), "the number of shards, -s N, must be at least 1");
  flags_.num_shards = 1;
  flags_.job.mode = "local";
  EXPECT_EQ(UsageError(), "unknown --mode 'local'; use dist_sync or dist_async");
  flags_.job.mode = "dist_async";
  flags_.job.job_id = "a b";
  EXPECT_THAT(UsageError(), StartsWith("--job_id 'a b' may hold only"));
  flags_.job.job_id = "";
  flags_.env = {"=x"};
  EXPECT_EQ(UsageError(), "--env '=x': expected NAME or NAME=VALUE");
  flags_.env = {};
  flags_.tls = true;
  flags_.insecure = true;
  EXPECT_THAT(UsageError(), StartsWith("--insecure and --tls"));
}

TEST_F(LaunchConfigTest, TheUsersOwnProgram) {
  const std::string program = TmpDir() + "/my_trainer";
  WriteExecutable(program, "exit 0");
  absl::StatusOr<LaunchOptions> o = Options({program, "--epochs=1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->worker_program, program);
  EXPECT_THAT(o->worker_argv, ElementsAre(program, "--epochs=1"));
  flags_.worker_binary = program;
  EXPECT_THAT(UsageError({program}), StartsWith("--worker_binary runs with the flags after --"));
}

TEST_F(LaunchConfigTest, AMissingProgramIsNoUsageError) {
  absl::StatusOr<LaunchOptions> o = Options({"no_such_trainer_xyz"});
  EXPECT_FALSE(absl::IsInvalidArgument(o.status()));
  EXPECT_THAT(std::string(o.status().message()),
              StartsWith("cannot find the program 'no_such_trainer_xyz' in PATH"));
  o = Options({"--devices=gpu:0"});  // worker_gpu is not in these runfiles
  EXPECT_FALSE(absl::IsInvalidArgument(o.status()));
  EXPECT_THAT(std::string(o.status().message()), HasSubstr("//services:worker_gpu"));
}

TEST_F(LaunchConfigTest, EnvSetsAndForwards) {
  flags_.env = {"PATH=/opt/bin", "HOME"};
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(EnvValue(o->environment, "PATH"), "/opt/bin");
  EXPECT_THAT(o->forwarded_env, ElementsAre("PATH", "HOME"));
}

TEST_F(LaunchConfigTest, OverSshTheJobUsesTlsAndRunsInTheLaunchersDirectory) {
  launcher_.environment = {"PATH=/usr/bin"};  // not under bazel run
  const std::string hosts = TmpDir() + "/hosts";
  ASSERT_TRUE(WriteFileAtomically(hosts, "node1\nnode2 slots=2\n").ok());
  flags_.hosts = hosts;
  flags_.ssh_options = "-o  StrictHostKeyChecking=no";
  flags_.ssh_identity = "key";
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->working_dir, "/runfiles/cohort");
  EXPECT_TRUE(o->tls);
  EXPECT_EQ(o->make_job_certs, runfiles_ + "/cohort/tools/make_job_certs.sh");
  ASSERT_EQ(o->hosts.size(), 2u);
  EXPECT_EQ(o->hosts[1].slots, 2);
  EXPECT_EQ(o->placement.workers.size(), 2u);
  EXPECT_THAT(o->ssh.extra, ElementsAre("-o", "StrictHostKeyChecking=no"));
  EXPECT_EQ(o->ssh.identity, "/runfiles/cohort/key");

  flags_.insecure = true;
  o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->tls);
}

TEST_F(LaunchConfigTest, HostMistakes) {
  flags_.hosts = "a,a:2";
  EXPECT_THAT(UsageError(), HasSubstr("host a is listed twice"));
  flags_.hosts = "no/such/hosts";
  EXPECT_EQ(UsageError(), "-H no/such/hosts: no such hosts file");
  flags_.hosts = "localhost,b";
  EXPECT_THAT(UsageError(), StartsWith("the scheduler's host 'localhost' is a loopback name"));
}

// A lone name with no file of that name is not taken for a host: ssh would be tried on it.
TEST_F(LaunchConfigTest, AMissingHostsFileIsOneErrorSayingHowToNameOneHost) {
  flags_.hosts = "hosts";
  EXPECT_EQ(UsageError(), "-H hosts: no such hosts file (for a job on the one host hosts, "
                          "write -H hosts:1)");
  flags_.hosts = "--log-file=x";
  EXPECT_EQ(UsageError(), "-H --log-file=x: no such hosts file");
  flags_.hosts = "hosts\x1b[2J";
  EXPECT_EQ(UsageError(), "-H hosts\\x1b[2J: no such hosts file");
  flags_.hosts = "node1:1";
  flags_.num_workers = 1;
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->hosts.size(), 1u);
  EXPECT_EQ(o->hosts[0].name, "node1");
}

TEST_F(LaunchConfigTest, AHostileHostsFileIsOneErrorNamingItsLine) {
  const std::string hosts = TmpDir() + "/hostile_hosts";
  ASSERT_TRUE(
      WriteFileAtomically(hosts, "\xEF\xBB\xBFnode1\r\n--log-file=/tmp/x slots=2\r\n").ok());
  flags_.hosts = hosts;
  EXPECT_THAT(UsageError(),
              StartsWith(hosts + ":2: '--log-file=/tmp/x' is not a host name (it starts with "
                                 "'-', as an option does)"));
}

TEST_F(LaunchConfigTest, TlsFiles) {
  flags_.tls_dir = "/nonexistent";
  EXPECT_THAT(UsageError(), StartsWith("--tls_dir /nonexistent has no ca.pem"));
  flags_.tls_dir = "";
  flags_.tls = true;
  unlink((runfiles_ + "/cohort/tools/make_job_certs.sh").c_str());
  absl::StatusOr<LaunchOptions> o = Options();
  EXPECT_TRUE(absl::IsNotFound(o.status())) << o.status();
  EXPECT_THAT(std::string(o.status().message()), HasSubstr("pass --make_job_certs or --tls_dir"));
}

// On this machine the worker also opens the data (--validate_data).
TEST_F(LaunchConfigTest, TheWorkersFlagsAreCheckedOnce) {
  const std::string worker = TmpDir() + "/checking_worker";
  WriteExecutable(worker, "[ \"$1\" = --validate_only ] || exit 9\n"
                          "[ \"$2\" = --validate_data=2 ] || exit 9\n"
                          "[ \"$3\" = --model=lenet ] && exit 0\n"
                          "echo \"worker: error: unknown model\"; exit 2");
  flags_.worker_binary = worker;
  launcher_.environment = {"BUILD_WORKING_DIRECTORY=" + TmpDir()};
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  absl::StatusOr<std::optional<std::string>> complaint = CheckWorkerFlags(*o);
  ASSERT_TRUE(complaint.ok()) << complaint.status();
  EXPECT_EQ(*complaint, std::nullopt);
  o = Options({"--model=vgg"});
  ASSERT_TRUE(o.ok()) << o.status();
  complaint = CheckWorkerFlags(*o);
  ASSERT_TRUE(complaint.ok()) << complaint.status();
  EXPECT_EQ(*complaint, "worker: error: unknown model\n");
}

TEST_F(LaunchConfigTest, TheSyncFolderIsAbsolute) {
  absl::StatusOr<LaunchOptions> o = Options();
  ASSERT_TRUE(o.ok()) << o.status();
  std::ostringstream out;
  const absl::Status s = SyncJobToHosts(*o, "job", {"--model=lenet"}, out);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(s.message(),
            "--sync_dst_dir job: give an absolute path (it is a folder on every host)");
  EXPECT_EQ(out.str(), "");
}

TEST(LauncherProcessTest, EnvironmentAndDirectories) {
  const char* const environ[] = {"A=1", "AB=2", "RUNFILES_DIR=/r", nullptr};
  const LauncherProcess launcher = ThisLauncher(environ);
  EXPECT_THAT(launcher.environment, ElementsAre("A=1", "AB=2", "RUNFILES_DIR=/r"));
  EXPECT_EQ(EnvValue(launcher.environment, "A"), "1");
  EXPECT_EQ(EnvValue(launcher.environment, "AB"), "2");
  EXPECT_EQ(EnvValue(launcher.environment, "B"), "");
  ASSERT_EQ(launcher.runfiles_dirs.size(), 2u);
  EXPECT_EQ(launcher.runfiles_dirs[0], "/r");
  EXPECT_THAT(launcher.runfiles_dirs[1], HasSubstr("launch_config_test.runfiles"));
  EXPECT_FALSE(launcher.cpus.empty());
  EXPECT_EQ(UserDir(launcher), launcher.current_dir);
  LauncherProcess under_bazel_run = launcher;
  under_bazel_run.environment.push_back("BUILD_WORKING_DIRECTORY=/home/u");
  EXPECT_EQ(UserDir(under_bazel_run), "/home/u");
}

}  // namespace
}  // namespace cohort::launch
