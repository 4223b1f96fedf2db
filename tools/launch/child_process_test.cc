#include "tools/launch/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_tmp_dir.h"

namespace cohort::launch {
namespace {

using ::testing::HasSubstr;
using Stream = ChildProcess::Stream;

std::unique_ptr<ChildProcess> MustSpawn(std::vector<std::string> argv,
                                        std::vector<std::string> env = {"PATH=/bin:/usr/bin"},
                                        std::string working_dir = "") {
  SpawnOptions o;
  o.path = argv[0];
  o.argv = std::move(argv);
  o.env = std::move(env);
  o.working_dir = std::move(working_dir);
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? *std::move(child) : nullptr;
}

// Reads one stream until it holds `until` (or, when empty, until EOF).
std::string ReadStream(ChildProcess& child, Stream s, const std::string& until = "") {
  std::string text;
  char buffer[4096];
  while (child.fd(s) >= 0 && (until.empty() || text.find(until) == std::string::npos)) {
    pollfd p = {child.fd(s), POLLIN, 0};
    poll(&p, 1, 5000);
    const ssize_t n = read(child.fd(s), buffer, sizeof(buffer));
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      child.Close(s);
    }
  }
  return text;
}

int WaitForExit(ChildProcess& child) {
  for (int i = 0; i < 500 && !child.TryReap(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(child.reaped());
  return child.reaped() ? child.wait_status() : -1;
}

// Whether a process is gone or a zombie (dead, not yet reaped by its new parent).
bool IsDead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

bool BecomesDead(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (IsDead(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ChildProcessTest, StdinIsDevNullUnlessAPipeIsAskedFor) {
  std::unique_ptr<ChildProcess> quiet = MustSpawn({"/bin/cat"});
  ASSERT_NE(quiet, nullptr);
  EXPECT_EQ(quiet->stdin_fd(), -1);
  EXPECT_EQ(ReadStream(*quiet, Stream::kStdout), "");
  EXPECT_EQ(WaitForExit(*quiet), 0);

  SpawnOptions o;
  o.path = "/bin/cat";
  o.argv = {"/bin/cat"};
  o.stdin_pipe = true;
  absl::StatusOr<std::unique_ptr<ChildProcess>> cat = ChildProcess::Spawn(o);
  ASSERT_TRUE(cat.ok()) << cat.status();
  ASSERT_GE((*cat)->stdin_fd(), 0);
  EXPECT_TRUE(fcntl((*cat)->stdin_fd(), F_GETFL) & O_NONBLOCK);
  ASSERT_EQ(write((*cat)->stdin_fd(), "hello\n", 6), 6);
  EXPECT_EQ(ReadStream(**cat, Stream::kStdout, "\n"), "hello\n");
  // Closing our end is the child's end-of-file.
  (*cat)->CloseStdin();
  EXPECT_EQ((*cat)->stdin_fd(), -1);
  EXPECT_EQ(ReadStream(**cat, Stream::kStdout), "");
  EXPECT_EQ(WaitForExit(**cat), 0);
}

TEST(ChildProcessTest, CapturesStdoutAndStderrSeparately) {
  auto child = MustSpawn({"/bin/sh", "-c", "echo out; echo err >&2; printf tail"});
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(ReadStream(*child, Stream::kStdout), "out\ntail");
  EXPECT_EQ(ReadStream(*child, Stream::kStderr), "err\n");
  EXPECT_EQ(WaitForExit(*child), 0);
}

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"/bin/sh", "-c", script};
  o.env = {"PATH=/bin:/usr/bin"};
  return o;
}

TEST(ChildProcessTest, RunToCompletionCollectsBothStreamsAndTheExitStatus) {
  absl::StatusOr<CompletedProcess> done =
      RunToCompletion(Shell("echo out; echo err >&2; exit 3"), absl::Seconds(30));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->output, "out\nerr\n");
  EXPECT_EQ(DescribeWaitStatus(done->wait_status), "exited with status 3");
}

TEST(ChildProcessTest, RunToCompletionStopsAProgramThatOverstays) {
  const absl::Time start = absl::Now();
  absl::StatusOr<CompletedProcess> done =
      RunToCompletion(Shell("exec sleep 30"), absl::Milliseconds(300));
  EXPECT_EQ(done.status().code(), absl::StatusCode::kDeadlineExceeded) << done.status();
  EXPECT_THAT(done.status().message(), HasSubstr("/bin/sh did not finish within 300ms"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ChildProcessTest, PassesExactlyTheGivenEnvironmentAndWorkingDirectory) {
  const std::string dir = TmpDir();
  auto child = MustSpawn({"/bin/sh", "-c", "echo \"$A|$HOME|$(pwd -P)\""}, {"A=1"}, dir);
  ASSERT_NE(child, nullptr);
  char real[PATH_MAX];
  ASSERT_NE(realpath(dir.c_str(), real), nullptr);
  EXPECT_EQ(ReadStream(*child, Stream::kStdout), std::string("1||") + real + "\n");
  EXPECT_EQ(WaitForExit(*child), 0);
}

TEST(ChildProcessTest, StdinIsEmpty) {
  auto child = MustSpawn({"/bin/cat"});
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(ReadStream(*child, Stream::kStdout), "");
  EXPECT_EQ(WaitForExit(*child), 0);
}

TEST(ChildProcessTest, LeadsItsOwnProcessGroupAndTheDestructorKillsTheGroup) {
  // The shell starts a grandchild in the same group, then waits.
  auto child = MustSpawn({"/bin/sh", "-c", "sleep 30 & echo $!; wait"});
  ASSERT_NE(child, nullptr);
  const std::string grandchild_line = ReadStream(*child, Stream::kStdout, "\n");
  const pid_t grandchild = std::stoi(grandchild_line);
  const pid_t pid = child->pid();
  EXPECT_EQ(getpgid(pid), pid);
  EXPECT_EQ(getpgid(grandchild), pid);
  EXPECT_NE(getpgid(0), pid);
  child.reset();
  EXPECT_TRUE(IsDead(pid));
  EXPECT_TRUE(BecomesDead(grandchild));
}

TEST(ChildProcessTest, SignalGroupReachesTheChildsOwnChildren) {
  auto child = MustSpawn({"/bin/sh", "-c", "sleep 30 & echo $!; wait"});
  ASSERT_NE(child, nullptr);
  const pid_t grandchild = std::stoi(ReadStream(*child, Stream::kStdout, "\n"));
  child->SignalGroup(SIGTERM);
  const int status = WaitForExit(*child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_TRUE(BecomesDead(grandchild));
}

TEST(ChildProcessTest, StartsWithNoBlockedOrIgnoredSignals) {
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  struct sigaction ignore = {}, old_action;
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGUSR1, &ignore, &old_action), 0);

  auto child = MustSpawn({"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"});

  sigaction(SIGUSR1, &old_action, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_NE(child, nullptr);
  unsigned long long blocked = ~0ull, ignored = ~0ull;
  ASSERT_EQ(std::sscanf(ReadStream(*child, Stream::kStdout).c_str(), "SigBlk: %llx SigIgn: %llx",
                        &blocked, &ignored),
            2);
  EXPECT_EQ(blocked, 0u);
  // Bit n-1 stands for signal n. Only the standard signals are checked: glibc reserves 32 and
  // 33 for itself, and Bazel's test runner may start us with them ignored.
  EXPECT_EQ(ignored & ((1ull << 31) - 1), 0u) << std::hex << ignored;
  EXPECT_EQ(WaitForExit(*child), 0);
}

TEST(ChildProcessTest, DiesWhenTheThreadThatSpawnedItEnds) {
  // A helper process spawns the child and exits without cleaning up: PR_SET_PDEATHSIG must kill
  // the child all the same.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t helper = fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    SpawnOptions o;
    o.path = "/bin/sleep";
    o.argv = {"sleep", "30"};
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
    const pid_t pid = child.ok() ? (*child)->pid() : -1;
    (void)!write(pipe_fds[1], &pid, sizeof(pid));
    _exit(0);  // no destructors: the child is left to PR_SET_PDEATHSIG
  }
  close(pipe_fds[1]);
  pid_t child_pid = -1;
  ASSERT_EQ(read(pipe_fds[0], &child_pid, sizeof(child_pid)),
            static_cast<ssize_t>(sizeof(child_pid)));
  close(pipe_fds[0]);
  int status;
  ASSERT_EQ(waitpid(helper, &status, 0), helper);
  ASSERT_GT(child_pid, 0);
  const bool dead = BecomesDead(child_pid);
  if (!dead) kill(child_pid, SIGKILL);
  EXPECT_TRUE(dead) << "pid " << child_pid << " outlived the process that spawned it";
}

TEST(ChildProcessTest, ReportsAMissingProgram) {
  SpawnOptions o;
  o.path = "/nonexistent/prog";
  o.argv = {"prog"};
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(child.status().message()),
              HasSubstr("cannot run /nonexistent/prog: No such file or directory"));
}

TEST(ChildProcessTest, ReportsAProgramThatIsNotExecutable) {
  const std::string path = TmpDir() + "/not_executable";
  std::ofstream(path) << "echo hi\n";
  SpawnOptions o;
  o.path = path;
  o.argv = {path};
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(child.status().message()), HasSubstr(path));
}

TEST(ChildProcessTest, ReportsABadWorkingDirectory) {
  SpawnOptions o;
  o.path = "/bin/true";
  o.argv = {"true"};
  o.working_dir = "/nonexistent/dir";
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_THAT(std::string(child.status().message()),
              HasSubstr("cannot change to directory /nonexistent/dir to run /bin/true"));
}

TEST(ChildProcessTest, DescribesExitsAndSignals) {
  auto exited = MustSpawn({"/bin/sh", "-c", "exit 3"});
  ASSERT_NE(exited, nullptr);
  const int status = WaitForExit(*exited);
  EXPECT_EQ(DescribeWaitStatus(status), "exited with status 3");
  EXPECT_EQ(ExitCodeOf(status), 3);

  auto killed = MustSpawn({"/bin/sh", "-c", "kill -9 $$"});
  ASSERT_NE(killed, nullptr);
  const int signalled = WaitForExit(*killed);
  EXPECT_EQ(DescribeWaitStatus(signalled), "was killed by signal 9 (Killed)");
  EXPECT_EQ(ExitCodeOf(signalled), 137);
}

}  // namespace
}  // namespace cohort::launch
