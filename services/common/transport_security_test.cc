// Mutual TLS and the job token over real sockets on loopback: the job's own peers get through;
// a peer without a certificate, with one from another CA or an expired one, without TLS, or
// without the right token is refused before the service sees the call, and counted by reason.

#include "services/common/transport_security.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <atomic>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/scheduler.grpc.pb.h"
#include "services/common/grpc_util.h"
#include "services/common/job_certs_testing.h"
#include "services/common/metrics.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

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
    ASSERT_TRUE(MakeJobCerts(job_, "scheduler worker").ok());
    ASSERT_TRUE(
        MakeJobCerts(job_, "expired", "COHORT_CERT_DATES='20200101000000Z 20200102000000Z'").ok());
    ASSERT_TRUE(MakeJobCerts(job_, "server-only", "COHORT_CERT_USAGE=serverAuth").ok());
    ASSERT_TRUE(MakeJobCerts(other_, "worker").ok());
    ASSERT_TRUE(WriteToken(tmp + "/token", "s3cret-job-token").ok());
    ASSERT_TRUE(WriteToken(tmp + "/wrong-token", "guessed").ok());
  }

  void SetUp() override {
    auto server_security = LoadSecurity(job_, "scheduler", TmpDir() + "/token");
    ASSERT_TRUE(server_security.ok()) << server_security.status();
    server_security_ = *server_security;
    auto server = StartServer("127.0.0.1", 0, {&service_}, *server_security_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override { server_.Shutdown(); }


  grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::Scheduler::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::RegisterReply reply;
    return stub->Register(&context, v1::RegisterRequest(), &reply);
  }
  grpc::Status CallAs(const std::string& dir, const std::string& name, const std::string& token) {
    auto security = LoadSecurity(dir, name, token);
    EXPECT_TRUE(security.ok()) << security.status();
    return Call(MakeChannel(Address(), **security));
  }
  std::string Address() const { return absl::StrCat("127.0.0.1:", server_.port); }
  int64_t Refused(Refusal reason) const {
    for (const auto& [r, count] : server_security_->refusals()) {
      if (r == reason) return count;
    }
    return -1;
  }

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
  EXPECT_EQ(server_security_->refused_requests(), 0);
}

TEST_F(TransportSecurityTest, AWrongOrMissingTokenIsRefusedAndCounted) {
  grpc::Status status = CallAs(job_, "worker", TmpDir() + "/wrong-token");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "token")) << status.error_message();
  status = CallAs(job_, "worker", "");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_EQ(Refused(Refusal::kWrongToken), 1);
  EXPECT_EQ(Refused(Refusal::kNoToken), 1);
  EXPECT_EQ(server_security_->refused_requests(), 2);
  EXPECT_EQ(service_.calls, 0);
}

TEST_F(TransportSecurityTest, PeersWithoutTheJobsCertificateNeverReachTheService) {
  auto job_ca = LoadSecurity(job_, "worker", "");
  ASSERT_TRUE(job_ca.ok());
  std::ifstream ca_file(job_ + "/ca.pem");
  const std::string ca((std::istreambuf_iterator<char>(ca_file)), {});
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("cohort");
  struct Case {
    const char* what;
    std::shared_ptr<grpc::Channel> channel;
    Refusal counted_as;
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
       grpc::CreateCustomChannel(Address(), grpc::SslCredentials(no_cert), args),
       Refusal::kNoCertificate},
      {"a certificate from another CA",
       grpc::CreateCustomChannel(Address(), grpc::SslCredentials(other_ca), args),
       Refusal::kUntrustedCertificate},
      {"an expired certificate",
       grpc::CreateCustomChannel(Address(), grpc::SslCredentials(expired), args),
       Refusal::kExpiredCertificate},
  };
  for (const Case& c : cases) {
    const grpc::Status status = Call(c.channel);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << c.what << ": " << status.error_message();
    EXPECT_EQ(Refused(c.counted_as), 1) << c.what;
  }
  // Without TLS there is no handshake to get through at all.
  EXPECT_EQ(Call(MakeChannel(Address())).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server_security_->refused_requests(), 3);
  EXPECT_EQ(service_.calls, 0);
}

int64_t RefusedConnections(const TransportSecurity& security, ConnectionRefusal reason,
                           const std::string& peer) {
  for (const TransportSecurity::RefusedConnections& r : security.refused_connections()) {
    if (r.reason == reason && r.peer == peer) return r.count;
  }
  return 0;
}

TEST_F(TransportSecurityTest, PlaintextOnTheTlsPortIsRefusedBeforeTheHandshakeWithThePeer) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(Call(MakeChannel(Address())).error_code(), grpc::StatusCode::UNAVAILABLE);
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_GE(RefusedConnections(*server_security_, ConnectionRefusal::kNotTls, "127.0.0.1"), 1);
  EXPECT_TRUE(absl::StrContains(
      logged, absl::StrCat("refused a connection from 127.0.0.1:")))
      << logged;
  EXPECT_TRUE(absl::StrContains(logged, absl::StrCat(" to port ", server_.port,
                                                     ": it did not open a TLS handshake")))
      << logged;
  EXPECT_EQ(server_security_->refused_requests(), 0);  // no call was made
  EXPECT_EQ(service_.calls, 0);
  // On /metrics by reason and peer.
  const std::string page =
      ProcessMetrics("job-tls", "scheduler", 0, server_security_).Route().handler().body;
  EXPECT_TRUE(absl::StrContains(page, "# TYPE cohort_refused_connections_total counter")) << page;
  EXPECT_TRUE(absl::StrContains(
      page, "role=\"scheduler\",peer=\"127.0.0.1\",reason=\"not_tls\"}"))
      << page;
}

TEST(PlaintextServerTest, TlsOnAPlaintextPortIsRefusedNamingTheMismatch) {
  CountingScheduler service;
  auto server = StartServer("127.0.0.1", 0, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string tmp = TmpDir() + "/tls-client";
  ASSERT_TRUE(MakeJobCerts(tmp, "worker").ok());
  auto security = LoadSecurity(tmp, "worker", "");
  ASSERT_TRUE(security.ok()) << security.status();
  const std::shared_ptr<const TransportSecurity> plaintext = TransportSecurity::Plaintext();
  const int64_t before =
      RefusedConnections(*plaintext, ConnectionRefusal::kTlsOnPlaintext, "127.0.0.1");
  testing::internal::CaptureStderr();
  auto stub = v1::Scheduler::NewStub(
      MakeChannel(absl::StrCat("127.0.0.1:", server->port), **security));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::RegisterReply reply;
  EXPECT_EQ(stub->Register(&context, v1::RegisterRequest(), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_GT(RefusedConnections(*plaintext, ConnectionRefusal::kTlsOnPlaintext, "127.0.0.1"),
            before);
  EXPECT_TRUE(absl::StrContains(logged, "this job is plaintext (--insecure)")) << logged;
  EXPECT_EQ(service.calls, 0);
  server->Shutdown();
}

// A self-signed certificate (PEM) and its key whose common name is `name`, byte for byte: what
// make_job_certs.sh refuses to make.
std::pair<std::string, std::string> SelfSigned(const std::string& name) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* subject = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_NID(subject, NID_commonName, V_ASN1_UTF8STRING,
                             reinterpret_cast<const unsigned char*>(name.data()),
                             static_cast<int>(name.size()), -1, 0);
  X509_set_issuer_name(cert, subject);
  X509_sign(cert, key, EVP_sha256());
  auto pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    std::string text(data, size);
    BIO_free(bio);
    return text;
  };
  std::pair<std::string, std::string> pems = {
      pem([&](BIO* b) { PEM_write_bio_X509(b, cert); }),
      pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); })};
  X509_free(cert);
  EVP_PKEY_free(key);
  return pems;
}

TEST_F(TransportSecurityTest, AHostileCertificateNameIsLoggedEscapedOnOneLine) {
  const auto [cert, key] =
      SelfSigned("e\nscheduler: job DONE: all 2 workers finished\x1b[31m");
  std::ifstream ca_file(job_ + "/ca.pem");
  grpc::SslCredentialsOptions hostile;
  hostile.pem_root_certs.assign(std::istreambuf_iterator<char>(ca_file), {});
  hostile.pem_cert_chain = cert;
  hostile.pem_private_key = key;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("cohort");
  testing::internal::CaptureStderr();
  const grpc::Status status =
      Call(grpc::CreateCustomChannel(Address(), grpc::SslCredentials(hostile), args));
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  const std::vector<std::string> refused = absl::StrSplit(logged, '\n', absl::SkipEmpty());
  ASSERT_EQ(refused.size(), 1u) << logged;
  EXPECT_TRUE(absl::StartsWith(refused[0], "refused a call from the peer with certificate 'e\\n"
                                           "scheduler: job DONE: all 2 workers finished\\x1b[31m'"))
      << logged;
  EXPECT_EQ(logged.find('\x1b'), std::string::npos) << logged;
  EXPECT_EQ(Refused(Refusal::kUntrustedCertificate), 1);
}

TEST_F(TransportSecurityTest, ACertificateOfTheJobsCaNotMadeForClientsIsNamedSo) {
  const grpc::Status status = CallAs(job_, "server-only", TmpDir() + "/token");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "not made for TLS clients"))
      << status.error_message();
  EXPECT_EQ(Refused(Refusal::kWrongCertificateUse), 1);
  EXPECT_EQ(Refused(Refusal::kUntrustedCertificate), 0);
}

TEST_F(TransportSecurityTest, TrustInAVerifiedCertificateEndsWhenItExpires) {
  const absl::Time now = absl::Now();
  auto date = [](absl::Time t) { return absl::FormatTime("%Y%m%d%H%M%SZ", t, absl::UTCTimeZone()); };
  const absl::Time expiry = now + absl::Seconds(6);
  ASSERT_TRUE(MakeJobCerts(job_, "short-lived",
                           absl::StrCat("COHORT_CERT_DATES='", date(now - absl::Hours(1)), " ",
                                        date(expiry), "'"))
                  .ok());
  auto security = LoadSecurity(job_, "short-lived", TmpDir() + "/token");
  ASSERT_TRUE(security.ok()) << security.status();
  const std::shared_ptr<grpc::Channel> channel = MakeChannel(Address(), **security);
  const grpc::Status before = Call(channel);
  ASSERT_TRUE(before.ok()) << before.error_message();
  // The same connection, so the same certificate, after it expired: checked again, refused.
  absl::SleepFor(expiry + absl::Seconds(1.5) - absl::Now());
  const grpc::Status after = Call(channel);
  EXPECT_EQ(after.error_code(), grpc::StatusCode::UNAUTHENTICATED) << after.error_message();
  EXPECT_EQ(Refused(Refusal::kExpiredCertificate), 1);
}

TEST_F(TransportSecurityTest, HttpRequestsNeedTheTokenWhenTheJobHasOne) {
  EXPECT_TRUE(server_security_->AdmitHttp("Bearer s3cret-job-token", "10.0.0.9:4711", "/status"));
  EXPECT_FALSE(server_security_->AdmitHttp("", "10.0.0.9:4711", "/status"));
  EXPECT_FALSE(server_security_->AdmitHttp("Bearer guessed", "10.0.0.9:4711", "/metrics"));
  EXPECT_FALSE(server_security_->AdmitHttp("s3cret-job-token", "10.0.0.9:4711", "/metrics"));
  EXPECT_EQ(Refused(Refusal::kNoToken), 1);
  EXPECT_EQ(Refused(Refusal::kWrongToken), 2);
  EXPECT_EQ(server_security_->authorization(), "Bearer s3cret-job-token");
  // A plaintext job has no token: its HTTP pages are open (on loopback).
  EXPECT_TRUE(TransportSecurity::Plaintext()->AdmitHttp("", "127.0.0.1:1", "/status"));
}

TEST_F(TransportSecurityTest, ATokenOrKeyOpenToEveryUserIsRefused) {
  const std::string token = TmpDir() + "/open-token";
  ASSERT_TRUE(WriteToken(token, "s3cret-job-token").ok());
  EXPECT_TRUE(LoadSecurity(job_, "worker", token).ok());
  ASSERT_EQ(chmod(token.c_str(), 0640), 0);  // the group may: a Kubernetes Secret's files
  EXPECT_TRUE(LoadSecurity(job_, "worker", token).ok());
  ASSERT_EQ(chmod(token.c_str(), 0644), 0);
  auto open_token = LoadSecurity(job_, "worker", token);
  ASSERT_EQ(open_token.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(open_token.status().message(),
                                absl::StrCat("the job token ", token, " is open to every user of "
                                             "this host (mode 0644): chmod 600 ", token)))
      << open_token.status();
  const std::string dir = TmpDir() + "/open-key";
  ASSERT_TRUE(MakeJobCerts(dir, "worker").ok());
  ASSERT_EQ(chmod((dir + "/worker.key").c_str(), 0602), 0);
  auto open_key = LoadSecurity(dir, "worker", "");
  ASSERT_EQ(open_key.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(open_key.status().message(), "the private key")) << open_key.status();
}

TEST_F(TransportSecurityTest, MissingFilesAndATokenWithoutTlsAreClearErrors) {
  auto missing = LoadSecurity(TmpDir() + "/nowhere", "worker", "");
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
