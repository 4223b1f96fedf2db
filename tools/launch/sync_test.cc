#include "tools/launch/sync.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/test_tmp_dir.h"

namespace cohort::launch {
namespace {

using ::testing::_;
using ::testing::ElementsAre;

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

TEST(ForEachHostTest, RunsEveryHostSeveralAtOnceAndSaysTheFirstHostsFailure) {
  const int n = 40;
  std::atomic<int> running{0}, most{0}, ran{0};
  const absl::Status s = ForEachHost(n, [&](int h) -> absl::Status {
    const int now = ++running;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
    absl::SleepFor(absl::Milliseconds(20));  // as a copy waits on the network
    --running;
    ++ran;
    if (h == 30 || h == 7) return absl::UnavailableError(absl::StrCat("host ", h));
    return absl::OkStatus();
  });
  EXPECT_EQ(s.message(), "host 7");
  EXPECT_EQ(ran.load(), n);  // a failure stops no other host's copy
  EXPECT_GT(most.load(), 1);
  EXPECT_LE(most.load(), kHostFanout);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

TEST(SyncTest, ProgramsInsideTheWorkingDirectoryKeepTheirPlaceOthersGoToCohortBin) {
  SyncPlan plan{"/home/me/proj", "/srv/job", {"/home/me/proj/bin/train", "/opt/x/shard"}};
  EXPECT_THAT(SyncedPrograms(plan),
              ElementsAre("/srv/job/bin/train", "/srv/job/.cohort-bin/shard"));
  SshOptions ssh;
  ssh.port = 2222;
  const auto commands = SyncCommands(plan, ssh, "me@node2");
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].back(), "me@node2:/srv/job/");
  EXPECT_EQ(commands[0][commands[0].size() - 2], "/home/me/proj/");
  EXPECT_EQ(commands[1][commands[1].size() - 2], "/opt/x/shard");
  EXPECT_EQ(commands[1].back(), "me@node2:/srv/job/.cohort-bin/");
  // rsync reaches the host with the launcher's own ssh options.
  EXPECT_THAT(commands[0], ::testing::Contains(::testing::HasSubstr("'-p' '2222'")));
}

// Options, then "--", then the paths: no path or host can be read as one of rsync's options.
TEST(SyncTest, EveryRsyncCommandPutsItsPathsAfterDoubleDash) {
  SyncPlan plan{"/home/me/proj", "/srv/job", {"/opt/x/shard"}};
  const auto commands = SyncCommands(plan, SshOptions(), "me@node2");
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_THAT(commands[0], ElementsAre("/usr/bin/rsync", "--archive", "--exclude=/.git",
                                       "--exclude=/bazel-*", "-e", _, "--", "/home/me/proj/",
                                       "me@node2:/srv/job/"));
  EXPECT_THAT(commands[1],
              ElementsAre("/usr/bin/rsync", "--copy-links", "--times", "--perms", "-e", _, "--",
                          "/opt/x/shard", "me@node2:/srv/job/.cohort-bin/"));
}

// rsync through a stand-in for ssh that runs the remote side here.
TEST(SyncTest, CopiesTheWorkingDirectoryAndTheProgramsWithRsync) {
  const std::string root = absl::StrCat(TmpDir(), "/sync-", getpid());
  const std::string work = root + "/work", dst = root + "/dst", elsewhere = root + "/elsewhere";
  for (const std::string& d : {root, work, work + "/sub", work + "/.git", elsewhere}) {
    mkdir(d.c_str(), 0755);
  }
  WriteFile(work + "/a.txt", "a");
  WriteFile(work + "/sub/b.txt", "b");
  WriteFile(work + "/.git/HEAD", "ref");
  ASSERT_EQ(symlink(elsewhere.c_str(), (work + "/bazel-out").c_str()), 0);
  WriteFile(elsewhere + "/role", "#!/bin/sh\n", 0755);
  ASSERT_EQ(symlink((elsewhere + "/role").c_str(), (root + "/role-link").c_str()), 0);
  // `ssh [options] -- host command...` here: drop everything up to the host.
  const std::string fake_ssh = root + "/ssh";
  WriteFile(fake_ssh,
            "#!/bin/sh\nwhile [ \"$1\" != fakehost ]; do shift; done; shift; exec sh -c \"$*\"\n",
            0755);
  SshOptions ssh;
  ssh.binary = fake_ssh;
  SyncPlan plan{work, dst, {root + "/role-link", work + "/a.txt"}};
  absl::Status s = SyncToHosts(plan, ssh, {Host{"fakehost", 1}}, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ReadFile(dst + "/a.txt"), "a");
  EXPECT_EQ(ReadFile(dst + "/sub/b.txt"), "b");
  EXPECT_FALSE(Exists(dst + "/.git"));
  EXPECT_FALSE(Exists(dst + "/bazel-out"));
  EXPECT_EQ(ReadFile(dst + "/.cohort-bin/role-link"), "#!/bin/sh\n");
  EXPECT_EQ(access((dst + "/.cohort-bin/role-link").c_str(), X_OK), 0);

  // A host rsync cannot reach is an error naming it.
  ssh.binary = "/bin/false";
  s = SyncToHosts(plan, ssh, {Host{"node9", 1}}, {"PATH=/usr/bin:/bin"});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("copying the job's files to node9"));
}

}  // namespace
}  // namespace cohort::launch
