// The launcher's event loop over fake processes: the scheduler first, the shards and workers
// once its port file is there, every line copied with its member's prefix, and the job's end:
// 0 when every worker finished, a failing worker's exit status (the others stopped), and the
// scheduler's absence of a port file said and the job stopped.

#include "tools/launch/job.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "services/common/port_file.h"
#include "tools/launch/child_process.h"
#include "tools/launch/launch_options.h"
#include "tools/launch/member_commands.h"
#include "tools/launch/signal_fd.h"

namespace cohort::launch {
namespace {

// How a fake member behaves: what it writes on its stdout and stderr, and how it ends.
struct Script {
  std::string out, err;
  // A worker's exit code, once its output is read (nullopt: it runs until stopped).
  std::optional<int> exit_code;
  // The scheduler and shards: end with 0 once every worker has ended with 0, as real ones do
  // when the scheduler says the job is done.
  bool ends_with_the_workers = true;
  bool writes_port = true;  // the scheduler: its port file, at once
};

class FakeJob;

// What a fake process did, kept past its end (the job's members own the processes).
struct Record {
  std::string role;
  int rank = 0;
  std::vector<int> signals;        // sent to its group, in order
  std::optional<int> wait_status;  // once reaped
};

// A member's process played by the test: its output comes through real non-blocking pipes
// (the loop polls them), closed when it ends; it ends as its script says or at SIGTERM and
// SIGKILL, with the wait status a real one would have.
class FakeProcess final : public Process {
 public:
  FakeProcess(FakeJob* job, std::shared_ptr<Record> record, Script script, int pid);
  ~FakeProcess() override {
    for (int& fd : read_) Close(fd);
    for (int& fd : write_) Close(fd);
  }

  pid_t pid() const override { return pid_; }
  int fd(Stream s) const override { return read_[static_cast<int>(s)]; }
  void Close(Stream s) override { Close(read_[static_cast<int>(s)]); }
  int stdin_fd() const override { return -1; }
  void CloseStdin() override {}
  bool TryReap() override;
  bool reaped() const override { return record_->wait_status.has_value(); }
  int wait_status() const override { return *record_->wait_status; }
  void SignalGroup(int sig) const override {
    record_->signals.push_back(sig);
    if (!ended_ && (sig == SIGTERM || sig == SIGKILL)) ended_ = sig;
  }

 private:
  static void Close(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }

  FakeJob* const job_;
  const std::shared_ptr<Record> record_;
  const Script script_;
  const int pid_;
  int read_[2] = {-1, -1};
  int write_[2] = {-1, -1};
  mutable std::optional<int> ended_;  // the wait status it ends with
};

// The processes a job started, by the order they were spawned, and their scripts by member.
class FakeJob {
 public:
  explicit FakeJob(std::string scratch) : scratch_(std::move(scratch)) {}

  void SetScript(const std::string& member, Script script) { scripts_[member] = script; }

  absl::StatusOr<std::unique_ptr<Process>> Spawn(const SpawnOptions& o) {
    std::string role, rank = "0";
    for (const std::string& kv : o.env) {
      if (absl::StartsWith(kv, "COHORT_ROLE=")) role = kv.substr(12);
      if (absl::StartsWith(kv, "COHORT_RANK=")) rank = kv.substr(12);
    }
    const std::string member = role == "scheduler" ? role : absl::StrCat(role, " ", rank);
    spawned_.push_back(member);
    const Script script = scripts_.count(member) > 0 ? scripts_[member] : Script();
    if (role == "scheduler" && script.writes_port) {
      EXPECT_TRUE(WritePortFile(absl::StrCat(scratch_, "/", kSchedulerPortFile), 4321).ok());
    }
    auto record = std::make_shared<Record>();
    record->role = role;
    record->rank = std::stoi(rank);
    records_.push_back(record);
    return std::unique_ptr<Process>(std::make_unique<FakeProcess>(
        this, std::move(record), script, 1000 + static_cast<int>(records_.size()) - 1));
  }

  // Whether every worker spawned has ended, each with 0.
  bool WorkersDone() const {
    bool any = false;
    for (const auto& r : records_) {
      if (r->role != "worker") continue;
      if (r->wait_status != 0) return false;
      any = true;
    }
    return any;
  }

  const std::vector<std::string>& spawned() const { return spawned_; }
  const std::vector<std::shared_ptr<Record>>& records() const { return records_; }

 private:
  const std::string scratch_;
  std::map<std::string, Script> scripts_;
  std::vector<std::string> spawned_;
  std::vector<std::shared_ptr<Record>> records_;
};

FakeProcess::FakeProcess(FakeJob* job, std::shared_ptr<Record> record, Script script, int pid)
    : job_(job), record_(std::move(record)), script_(std::move(script)), pid_(pid) {
  for (int s = 0; s < 2; ++s) {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    read_[s] = fds[0];
    write_[s] = fds[1];
  }
  // A few lines into an empty pipe: written whole at once.
  EXPECT_EQ(write(write_[0], script_.out.data(), script_.out.size()),
            static_cast<ssize_t>(script_.out.size()));
  EXPECT_EQ(write(write_[1], script_.err.data(), script_.err.size()),
            static_cast<ssize_t>(script_.err.size()));
}

bool FakeProcess::TryReap() {
  if (reaped()) return true;
  if (!ended_) {
    if (script_.exit_code.has_value()) ended_ = *script_.exit_code << 8;
    if (record_->role != "worker" && script_.ends_with_the_workers && job_->WorkersDone()) {
      ended_ = 0;
    }
  }
  if (!ended_) return false;
  for (int& fd : write_) Close(fd);  // its end: the loop reads what is left, then EOF
  record_->wait_status = ended_;
  return true;
}

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/cohort-job-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    scratch_ = dir;
    ASSERT_EQ(pipe2(output_, O_CLOEXEC), 0);
    fcntl(output_[0], F_SETFL, O_NONBLOCK);
    options_.scheduler.job_id = "job-test";
    options_.scheduler.num_workers = 2;
    options_.scheduler.num_shards = 2;
    options_.scheduler_binary = "/fake/scheduler";
    options_.shard_binary = "/fake/shard";
    options_.worker_program = "/fake/worker";
    options_.worker_argv = {"/fake/worker", "--epochs=1"};
    options_.environment = {"PATH=/usr/bin:/bin"};
    options_.output_fd = output_[1];
    options_.start_timeout = absl::Seconds(2);
    auto signals = SignalFd::Create({SIGINT, SIGTERM, SIGCHLD});
    ASSERT_TRUE(signals.ok()) << signals.status();
    signals_ = *std::move(signals);
    job_ = std::make_unique<FakeJob>(scratch_);
  }
  void TearDown() override {
    close(output_[0]);
    close(output_[1]);
    job_.reset();
    std::filesystem::remove_all(scratch_);
  }

  // Runs the job: its exit status; Output() then holds what it wrote.
  int Run() {
    return RunJobProcesses(options_, *signals_, scratch_, [this](const SpawnOptions& o) {
      return job_->Spawn(o);
    });
  }
  std::string Output() {
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = read(output_[0], buffer, sizeof buffer)) > 0) text.append(buffer, n);
    return text;
  }

  std::string scratch_;
  int output_[2] = {-1, -1};
  LaunchOptions options_;
  std::unique_ptr<SignalFd> signals_;
  std::unique_ptr<FakeJob> job_;
};

TEST_F(JobTest, TheSchedulerFirstThenShardsAndWorkersAndEveryLineWithItsPrefix) {
  job_->SetScript("worker 0", {"step 1\nstep 2\n", "a warning\n", 0});
  job_->SetScript("worker 1", {"step 1\nno newline at the end", "", 0});
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(job_->spawned(), (std::vector<std::string>{"scheduler", "shard 0", "shard 1",
                                                        "worker 0", "worker 1"}));
  const std::string out = Output();
  for (const std::string line :
       {"[worker 0] step 1\n", "[worker 0] step 2\n", "[worker 0] a warning\n",
        "[worker 1] step 1\n", "[worker 1] no newline at the end\n",
        "launch: job job-test: scheduler at 127.0.0.1:4321 (pid 1000), 2 shards, 2 workers, "
        "plaintext; workers run /fake/worker --epochs=1\n"}) {
    EXPECT_TRUE(absl::StrContains(out, line)) << line << " in\n" << out;
  }
  // Each stream's lines stay in their order.
  EXPECT_LT(out.find("[worker 0] step 1"), out.find("[worker 0] step 2"));
  // Nothing had to be stopped: every member ended on its own.
  for (const auto& r : job_->records()) {
    for (int sig : r->signals) EXPECT_EQ(sig, SIGKILL) << r->role << " " << r->rank;
  }
}

TEST_F(JobTest, AFailingWorkersExitStatusIsTheJobsAndTheOthersAreStopped) {
  job_->SetScript("worker 0", {"", "", std::nullopt});  // runs until stopped
  job_->SetScript("worker 1", {"", "worker 1: out of memory\n", 3});
  EXPECT_EQ(Run(), 3);
  const std::string out = Output();
  EXPECT_TRUE(absl::StrContains(out, "[worker 1] worker 1: out of memory\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "worker 1 (pid 1004) exited with status 3")) << out;
  // The worker that ran on, the shards and the scheduler were stopped (SIGTERM first).
  for (const auto& r : job_->records()) {
    if (r->role == "worker" && r->rank == 1) continue;
    ASSERT_FALSE(r->signals.empty()) << r->role << " " << r->rank;
    EXPECT_EQ(r->signals.front(), SIGTERM) << r->role << " " << r->rank;
    EXPECT_EQ(r->wait_status, SIGTERM) << r->role << " " << r->rank;
  }
}

TEST_F(JobTest, ASchedulerThatWritesNoPortIsSaidAndStopped) {
  Script silent;
  silent.writes_port = false;
  silent.ends_with_the_workers = false;
  job_->SetScript("scheduler", silent);
  EXPECT_EQ(Run(), 1);
  EXPECT_EQ(job_->spawned(), std::vector<std::string>{"scheduler"});
  const std::string out = Output();
  EXPECT_TRUE(absl::StrContains(out, "scheduler.port")) << out;
  ASSERT_FALSE(job_->records().front()->signals.empty());
  EXPECT_EQ(job_->records().front()->signals.front(), SIGTERM);
}

}  // namespace
}  // namespace cohort::launch
