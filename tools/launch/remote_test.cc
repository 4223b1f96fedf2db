#include "tools/launch/remote.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_tmp_dir.h"
#include "tools/launch/child_process.h"
#include "tools/launch/line_prefixer.h"

namespace cohort::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Stream = ChildProcess::Stream;

TEST(ShellQuoteTest, SurvivesTheShell) {
  const std::string tricky = "it's a \"$HOME\" `x` \\ ; rm -rf / \n *";
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"/bin/sh", "-c", "printf %s " + ShellQuote(tricky)};
  absl::StatusOr<CompletedProcess> done = RunToCompletion(o, absl::Seconds(10));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->output, tricky);
}

TEST(HostNamesTest, SshTargetAndPeerAddress) {
  EXPECT_EQ(SshTarget("node1"), "node1");
  EXPECT_EQ(SshTarget("alice@node1"), "alice@node1");
  EXPECT_EQ(SshTarget("[fe80::1]"), "fe80::1");
  EXPECT_EQ(SshTarget("bob@[fe80::1]"), "bob@fe80::1");
  EXPECT_EQ(AddressOfHost("alice@10.0.0.2"), "10.0.0.2");
  EXPECT_EQ(AddressOfHost("[fe80::1]"), "[fe80::1]");
}

TEST(SshArgvTest, NeverPromptsAndPassesTheUsersOptions) {
  SshOptions ssh;
  ssh.port = 2222;
  ssh.identity = "/keys/id";
  ssh.extra = {"-o", "StrictHostKeyChecking=no"};
  EXPECT_THAT(SshArgv(ssh, "alice@[fe80::1]", "true"),
              ElementsAre("/usr/bin/ssh", "-T", "-o", "BatchMode=yes", "-o",
                          "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o",
                          "ConnectTimeout=10", "-p", "2222", "-i", "/keys/id", "-o",
                          "StrictHostKeyChecking=no", "--", "alice@fe80::1", "true"));
}

TEST(RunDirFilesTest, RefusesNamesThatAreNotPlainFileNames) {
  EXPECT_TRUE(RunDirFiles({{"ca.pem", "x"}}).ok());
  for (const char* bad : {"", ".", "..", "../x", "a/b", "a b"}) {
    EXPECT_FALSE(RunDirFiles({{bad, "x"}}).ok()) << bad;
  }
}

TEST(ParsePortAnnouncementTest, TakesOnlyWellFormedLines) {
  const auto a = ParsePortAnnouncement("port scheduler.port 9000");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->file, "scheduler.port");
  EXPECT_EQ(a->port, 9000);
  for (const char* bad : {"port x.port", "port x.port 0", "port x.port 70000", "port ../x 1",
                          "bort x.port 1", "port x.port 12 13"}) {
    EXPECT_FALSE(ParsePortAnnouncement(bad).has_value()) << bad;
  }
}

// The wrapper run as ssh would run it on a host, here through /bin/sh -c.
class WrapperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);  // heartbeats may meet a wrapper that has just ended
    run_dir_ = absl::StrCat(TmpDir(), "/run-", getpid(), "-",
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  std::unique_ptr<ChildProcess> Start(RemoteMember m) {
    m.run_dir = run_dir_;
    if (m.working_dir.empty()) m.working_dir = TmpDir();
    SpawnOptions o;
    o.path = "/bin/sh";
    o.argv = {"/bin/sh", "-c", RemoteCommand(m)};
    o.env = {"PATH=/usr/bin:/bin"};
    o.stdin_pipe = true;
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(o);
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  static void Send(ChildProcess& p, const std::string& bytes) {
    ASSERT_EQ(write(p.stdin_fd(), bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
  }

  // Reads stdout and stderr until the wrapper exits; heartbeats every 200 ms while `beat`.
  struct Ended {
    std::string out, err;
    std::vector<std::string> control;
    int status = -1;
    double seconds = 0;
  };
  static Ended RunToEnd(ChildProcess& p, bool beat, double limit_s = 20) {
    Ended e;
    LinePrefixer lines[2] = {LinePrefixer(""), LinePrefixer("")};
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    while ((p.fd(Stream::kStdout) >= 0 || p.fd(Stream::kStderr) >= 0) && elapsed() < limit_s) {
      pollfd fds[2] = {{p.fd(Stream::kStdout), POLLIN, 0}, {p.fd(Stream::kStderr), POLLIN, 0}};
      poll(fds, 2, 200);
      if (beat && p.stdin_fd() >= 0) (void)!write(p.stdin_fd(), "\n", 1);
      for (int s = 0; s < 2; ++s) {
        char buffer[4096];
        const int fd = p.fd(static_cast<Stream>(s));
        if (fd < 0) continue;
        const ssize_t n = read(fd, buffer, sizeof buffer);
        if (n > 0) {
          lines[s].Feed(absl::string_view(buffer, n), s == 0 ? &e.out : &e.err, &e.control);
        } else if (n == 0) {
          p.Close(static_cast<Stream>(s));
        }
      }
    }
    while (!p.TryReap() && elapsed() < limit_s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    e.seconds = elapsed();
    if (p.reaped()) e.status = ExitCodeOf(p.wait_status());
    return e;
  }

  bool RunDirExists() const {
    struct stat st;
    return stat(run_dir_.c_str(), &st) == 0;
  }

  std::string run_dir_;
};

TEST_F(WrapperTest, RunsTheProgramWithItsFilesEnvironmentAndPortsThenCleansUp) {
  RemoteMember m;
  m.workers_on_host = 100000;  // more workers than cores: one thread each
  m.env = {"FOO=bar baz", absl::StrCat("RUN=", "unused")};
  m.argv = {"/bin/sh", "-c",
            "pwd; echo \"$FOO|$OMP_NUM_THREADS\"; cat \"$0/token\"; stat -c %a \"$0\";"
            "echo 4242 > \"$0/x.tmp\"; mv \"$0/x.tmp\" \"$0/x.port\"; sleep 1.5; exit 3",
            run_dir_};
  std::unique_ptr<ChildProcess> p = Start(m);
  ASSERT_NE(p, nullptr);
  absl::StatusOr<std::string> files = RunDirFiles({{"token", "s3cret\n"}, {"ca.pem", "PEM"}});
  ASSERT_TRUE(files.ok());
  Send(*p, *files);
  const Ended e = RunToEnd(*p, /*beat=*/true);
  EXPECT_EQ(e.status, 3) << e.err;
  EXPECT_EQ(e.out, absl::StrCat(TmpDir(), "\nbar baz|1\ns3cret\n700\n")) << e.err;
  EXPECT_THAT(e.control, ElementsAre("port x.port 4242"));
  EXPECT_EQ(e.err, "");
  EXPECT_FALSE(RunDirExists());
}

// The process group of a program the wrapper stopped, read from the program's first line.
void ExpectGroupGone(const std::string& out) {
  int group = 0;
  ASSERT_TRUE(absl::SimpleAtoi(out.substr(0, out.find('\n')), &group))
      << out;
  EXPECT_NE(kill(-group, 0), 0) << "process group " << group << " survived";
}

TEST_F(WrapperTest, RemovesTheFoldersOfWrappersKilledOutright) {
  const std::string tmp = TmpDir();
  auto make = [](const std::string& dir, const std::string& owner) {
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
    if (!owner.empty()) std::ofstream(dir + "/.owner") << owner << "\n";
  };
  // This process's start time, as the wrapper records its own.
  std::ifstream self("/proc/self/stat");
  const std::string self_stat((std::istreambuf_iterator<char>(self)), {});
  const std::vector<std::string> fields =
      absl::StrSplit(self_stat.substr(self_stat.rfind(") ") + 2), ' ');
  const std::string dead = tmp + "/cohort-j1-worker-0";      // its owner is gone
  const std::string running = tmp + "/cohort-j1-shard-0";    // its owner still runs
  const std::string reused = tmp + "/cohort-j1-worker-1";    // its pid now names another process
  const std::string foreign = tmp + "/cohort-notes";         // not a run folder
  make(dead, "999999999 1");
  make(running, absl::StrCat(getpid(), " ", fields[19]));
  make(reused, absl::StrCat(getpid(), " 1"));
  make(foreign, "");
  run_dir_ = tmp + "/cohort-j2-worker-0";
  RemoteMember m;
  m.argv = {"/bin/true"};
  std::unique_ptr<ChildProcess> p = Start(m);
  ASSERT_NE(p, nullptr);
  Send(*p, ".\n");
  const Ended e = RunToEnd(*p, /*beat=*/true);
  EXPECT_EQ(e.status, 0) << e.err;
  struct stat st;
  EXPECT_NE(stat(dead.c_str(), &st), 0);
  EXPECT_NE(stat(reused.c_str(), &st), 0);
  EXPECT_EQ(stat(running.c_str(), &st), 0);
  EXPECT_EQ(stat(foreign.c_str(), &st), 0);
  EXPECT_FALSE(RunDirExists());
}

TEST_F(WrapperTest, EndOfFileStopsTheProgramAndEverythingItStarted) {
  RemoteMember m;
  // Prints its process group, then waits on a child of its own that sleeps.
  m.argv = {"/bin/sh", "-c", "ps -o pgid= $$ | tr -d ' '; sleep 60 & wait"};
  std::unique_ptr<ChildProcess> p = Start(m);
  ASSERT_NE(p, nullptr);
  Send(*p, ".\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  p->CloseStdin();
  const Ended e = RunToEnd(*p, /*beat=*/false);
  EXPECT_EQ(e.status, 128 + SIGTERM) << e.err;
  EXPECT_LT(e.seconds, 5);
  EXPECT_THAT(e.err, HasSubstr("closed its connection or fell silent"));
  ExpectGroupGone(e.out);
  EXPECT_FALSE(RunDirExists());
}

TEST_F(WrapperTest, SilenceStopsTheProgramAndAProgramIgnoringSigtermIsKilled) {
  RemoteMember m;
  m.silence = absl::Seconds(1);
  m.argv = {"/bin/sh", "-c", "trap '' TERM; ps -o pgid= $$ | tr -d ' '; sleep 60 & wait"};
  std::unique_ptr<ChildProcess> p = Start(m);
  ASSERT_NE(p, nullptr);
  Send(*p, ".\n");  // then not a single heartbeat, with stdin still open
  const Ended e = RunToEnd(*p, /*beat=*/false);
  EXPECT_EQ(e.status, 128 + SIGKILL) << e.err;
  EXPECT_LT(e.seconds, 8);
  ExpectGroupGone(e.out);
  EXPECT_FALSE(RunDirExists());
}

TEST_F(WrapperTest, SaysWhatIsWrongWhenTheWorkingDirectoryIsMissing) {
  RemoteMember m;
  m.working_dir = "/nonexistent/cohort";
  m.argv = {"/bin/true"};
  std::unique_ptr<ChildProcess> p = Start(m);
  ASSERT_NE(p, nullptr);
  Send(*p, ".\n");
  const Ended e = RunToEnd(*p, /*beat=*/true);
  EXPECT_EQ(e.status, 126);
  EXPECT_THAT(e.err, HasSubstr("cannot change to /nonexistent/cohort"));
  EXPECT_THAT(e.err, HasSubstr("--sync_dst_dir"));
  EXPECT_FALSE(RunDirExists());
}

}  // namespace
}  // namespace cohort::launch
