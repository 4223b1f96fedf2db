#include "tools/launch/credentials.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/durable_file.h"
#include "trainer/io/whole_file.h"
#include "services/common/test_tmp_dir.h"

namespace cohort::launch {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string MakeDir(const std::string& name) {
  const std::string dir = absl::StrCat(TmpDir(), "/", name);
  mkdir(dir.c_str(), 0700);
  return dir;
}

// A stand-in for tools/make_job_certs.sh: makes DIR and a CA file in it, or fails.
std::string Script(const std::string& dir, const std::string& body) {
  const std::string path = absl::StrCat(dir, "/make_certs.sh");
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(CredentialsTest, PlaintextNeedsNone) {
  LaunchOptions o;
  ASSERT_TRUE(MakeCredentials(o, "/nonexistent").ok());
  EXPECT_EQ(o.tls_dir, "");
  EXPECT_EQ(o.token_file, "");
}

TEST(CredentialsTest, MakesTheCertificatesAndTheTokenAJobLacks) {
  const std::string scratch = MakeDir("made");
  LaunchOptions o;
  o.tls = true;
  o.make_job_certs = Script(scratch, "mkdir -p \"$1\" && echo \"$2 $3 $4\" > \"$1/ca.pem\"");
  ASSERT_TRUE(MakeCredentials(o, scratch).ok());
  EXPECT_EQ(o.tls_dir, scratch + "/tls");
  EXPECT_EQ(*ReadWholeFile(o.tls_dir + "/ca.pem"), "scheduler shard worker\n");
  EXPECT_EQ(o.token_file, scratch + "/token");
  EXPECT_THAT(*ReadWholeFile(o.token_file), MatchesRegex("[0-9a-f]{64}\n"));
}

TEST(CredentialsTest, KeepsTheFilesGiven) {
  const std::string scratch = MakeDir("given");
  LaunchOptions o;
  o.tls = true;
  o.tls_dir = "/etc/job-tls";
  o.token_file = "/etc/job-token";
  ASSERT_TRUE(MakeCredentials(o, scratch).ok());
  EXPECT_EQ(o.tls_dir, "/etc/job-tls");
  EXPECT_EQ(o.token_file, "/etc/job-token");
}

TEST(CredentialsTest, AFailedScriptIsNamedWithItsOutput) {
  const std::string scratch = MakeDir("failed");
  LaunchOptions o;
  o.tls = true;
  o.make_job_certs = Script(scratch, "echo openssl is missing; exit 3");
  const absl::Status s = MakeCredentials(o, scratch);
  EXPECT_THAT(std::string(s.message()), HasSubstr(o.make_job_certs));
  EXPECT_THAT(std::string(s.message()), HasSubstr("openssl is missing"));
}

TEST(CredentialsTest, RunDirFilesAreReadAndPacked) {
  const std::string dir = MakeDir("run_dir");
  ASSERT_TRUE(WriteFileAtomically(dir + "/ca.pem", "CA").ok());
  absl::StatusOr<std::string> files = ReadRunDirFiles({{"ca.pem", dir + "/ca.pem"}});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, "ca.pem\nQ0E=\n.\n");
  EXPECT_EQ(*ReadRunDirFiles({}), ".\n");
  EXPECT_THAT(std::string(ReadRunDirFiles({{"token", dir + "/none"}}).status().message()),
              HasSubstr(dir + "/none"));
}

}  // namespace
}  // namespace cohort::launch
