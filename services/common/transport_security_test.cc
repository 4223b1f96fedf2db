// Mutual TLS and the job token over real sockets on loopback: the job's own peers get through;
// a peer without a certificate, with one from another CA or an expired one, without TLS, or
// without the right token is refused before the service sees the call.

#include "services/common/transport_security.h"

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/scheduler.grpc.pb.h"
#include "services/common/grpc_util.h"

namespace cohort {
namespace {

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// tools/make_job_certs.sh DIR NAME..., with `env` before it.
void MakeCerts(const std::string& dir, const std::string& names, const std::string& env = "") {
  const std::string script =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                   "/tools/make_job_certs.sh");
  const std::string command =
      absl::StrCat(env, " ", script, " ", dir, " ", names, " >/dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

void WriteToken(const std::string& path, const std::string& token) {
  std::ofstream(path) << token << "\n";
}

// Counts the calls that reached it.
class CountingScheduler final : public v1::Scheduler::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*,
                        v1::RegisterReply* reply) override {
    ++calls;
    reply->set_job_id("job-tls");
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

class TransportSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string tmp = TmpDir();
    job_ = tmp + "/job";
    other_ = tmp + "/other";
    MakeCerts(job_, "scheduler worker");
    MakeCerts(job_, "expired", "COHORT_CERT_DATES='20200101000000Z 20200102000000Z'");
    MakeCerts(other_, "worker");
    WriteToken(tmp + "/token", "s3cret-job-token");
    WriteToken(tmp + "/wrong-token", "guessed");
  }

  void SetUp() override {
    auto server_security = Load(job_, "scheduler", TmpDir() + "/token");
    ASSERT_TRUE(server_security.ok()) << server_security.status();
    server_security_ = *server_security;
    auto server = StartServer("127.0.0.1", 0, {&service_}, *server_security_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override { server_.server->Shutdown(); }

  static absl::StatusOr<std::shared_ptr<const TransportSecurity>> Load(
      const std::string& dir, const std::string& name, const std::string& token) {
    SecurityOptions o;
    o.insecure = false;
    o.tls_dir = dir;
    o.cert_name = name;
    o.token_file = token;
    return TransportSecurity::Load(o);
  }

  grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::Scheduler::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::RegisterReply reply;
    return stub->Register(&context, v1::RegisterRequest(), &reply);
  }
  grpc::Status CallAs(const std::string& dir, const std::string& name, const std::string& token) {
    auto security = Load(dir, name, token);
    EXPECT_TRUE(security.ok()) << security.status();
    return Call(MakeChannel(Address(), **security));
  }
  std::string Address() const { return absl::StrCat("127.0.0.1:", server_.port); }

  static std::string job_, other_;
  CountingScheduler service_;
  std::shared_ptr<const TransportSecurity> server_security_;
  RunningServer server_;
};

std::string TransportSecurityTest::job_;
std::string TransportSecurityTest::other_;

TEST_F(TransportSecurityTest, TheJobsOwnPeerWithTheTokenGetsThrough) {
  const grpc::Status status = CallAs(job_, "worker", TmpDir() + "/token");
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(service_.calls, 1);
  EXPECT_EQ(server_security_->refused_calls(), 0);
}

TEST_F(TransportSecurityTest, AWrongOrMissingTokenIsRefusedAndCounted) {
  grpc::Status status = CallAs(job_, "worker", TmpDir() + "/wrong-token");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "token")) << status.error_message();
  status = CallAs(job_, "worker", "");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_EQ(server_security_->refused_calls(), 2);
  EXPECT_EQ(service_.calls, 0);
}

TEST_F(TransportSecurityTest, PeersWithoutTheJobsCertificateNeverReachTheService) {
  auto job_ca = Load(job_, "worker", "");
  ASSERT_TRUE(job_ca.ok());
  std::ifstream ca_file(job_ + "/ca.pem");
  const std::string ca((std::istreambuf_iterator<char>(ca_file)), {});
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("cohort");
  struct Case {
    const char* what;
    std::shared_ptr<grpc::Channel> channel;
  };
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = ca;
  std::ifstream key_file(other_ + "/worker.key"), cert_file(other_ + "/worker.pem");
  grpc::SslCredentialsOptions other_ca = no_cert;
  other_ca.pem_private_key.assign(std::istreambuf_iterator<char>(key_file), {});
  other_ca.pem_cert_chain.assign(std::istreambuf_iterator<char>(cert_file), {});
  std::ifstream old_key(job_ + "/expired.key"), old_cert(job_ + "/expired.pem");
  grpc::SslCredentialsOptions expired = no_cert;
  expired.pem_private_key.assign(std::istreambuf_iterator<char>(old_key), {});
  expired.pem_cert_chain.assign(std::istreambuf_iterator<char>(old_cert), {});
  const Case cases[] = {
      {"no client certificate",
       grpc::CreateCustomChannel(Address(), grpc::SslCredentials(no_cert), args)},
      {"a certificate from another CA",
       grpc::CreateCustomChannel(Address(), grpc::SslCredentials(other_ca), args)},
      {"an expired certificate",
       grpc::CreateCustomChannel(Address(), grpc::SslCredentials(expired), args)},
      {"plaintext", MakeChannel(Address())},
  };
  for (const Case& c : cases) {
    const grpc::Status status = Call(c.channel);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << c.what << ": " << status.error_message();
  }
  EXPECT_EQ(service_.calls, 0);
}

TEST_F(TransportSecurityTest, MissingFilesAndATokenWithoutTlsAreClearErrors) {
  auto missing = Load(TmpDir() + "/nowhere", "worker", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "/nowhere/ca.pem"))
      << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "tools/make_job_certs.sh"))
      << missing.status();
  SecurityOptions plaintext_with_token;
  plaintext_with_token.token_file = TmpDir() + "/token";
  EXPECT_EQ(TransportSecurity::Load(plaintext_with_token).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*TransportSecurity::Load(SecurityOptions()))->plaintext());
}

}  // namespace
}  // namespace cohort
