#include "services/common/transport_security.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

// The name every certificate of a job is issued for (tools/make_job_certs.sh).
constexpr char kJobCertName[] = "cohort";
constexpr char kAuthorization[] = "authorization";

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path,
                                            " (make a job's files with tools/make_job_certs.sh)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Equal without returning early, so the time taken tells nothing of the token.
bool SameBytes(grpc::string_ref a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(a.data()[i] ^ b[i]);
  return diff == 0;
}

class TokenCheck final : public grpc::AuthMetadataProcessor {
 public:
  TokenCheck(std::string expected, std::shared_ptr<std::atomic<int64_t>> refused)
      : expected_(std::move(expected)), refused_(std::move(refused)) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata*) override {
    const auto it = metadata.find(kAuthorization);
    if (it != metadata.end() && SameBytes(it->second, expected_)) {
      consumed->insert({kAuthorization, std::string(it->second.data(), it->second.size())});
      return grpc::Status::OK;
    }
    refused_->fetch_add(1);
    std::string peer;
    for (const grpc::string_ref& name : context->GetPeerIdentity()) {
      absl::StrAppend(&peer, peer.empty() ? "" : ",", std::string(name.data(), name.size()));
    }
    std::cerr << "refused a call from " << (peer.empty() ? "an unnamed peer" : peer) << ": "
              << (it == metadata.end() ? "no job token" : "the wrong job token") << "\n";
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this job's token is missing or wrong (--token_file)");
  }

 private:
  const std::string expected_;  // "Bearer <token>"
  const std::shared_ptr<std::atomic<int64_t>> refused_;
};

class TokenPlugin final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit TokenPlugin(std::string value) : value_(std::move(value)) {}
  grpc::Status GetMetadata(grpc::string_ref, grpc::string_ref, const grpc::AuthContext&,
                           std::multimap<std::string, std::string>* metadata) override {
    metadata->insert({kAuthorization, value_});
    return grpc::Status::OK;
  }

 private:
  const std::string value_;
};

}  // namespace

std::shared_ptr<const TransportSecurity> TransportSecurity::Plaintext() {
  static const auto* const plaintext =
      new std::shared_ptr<const TransportSecurity>(new TransportSecurity());
  return *plaintext;
}

absl::StatusOr<std::shared_ptr<const TransportSecurity>> TransportSecurity::Load(
    const SecurityOptions& options) {
  if (options.insecure) {
    if (!options.token_file.empty()) {
      return absl::InvalidArgumentError(
          "--token_file needs TLS: give --tls_dir instead of --insecure");
    }
    return Plaintext();
  }
  if (options.tls_dir.empty() || options.cert_name.empty()) {
    return absl::InvalidArgumentError(
        "no --tls_dir: give the folder of the job's TLS files (tools/make_job_certs.sh), or "
        "--insecure for plaintext on one machine");
  }
  std::shared_ptr<TransportSecurity> s(new TransportSecurity());
  const std::string base = absl::StrCat(options.tls_dir, "/");
  absl::StatusOr<std::string> ca = ReadFile(base + "ca.pem", "the job's CA certificate");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert =
      ReadFile(absl::StrCat(base, options.cert_name, ".pem"), "the certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      ReadFile(absl::StrCat(base, options.cert_name, ".key"), "the private key");
  if (!key.ok()) return key.status();
  s->ca_ = *std::move(ca);
  s->cert_ = *std::move(cert);
  s->key_ = *std::move(key);
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadFile(options.token_file, "the job token");
    if (!token.ok()) return token.status();
    const absl::string_view t = absl::StripAsciiWhitespace(*token);
    if (t.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the job token ", options.token_file,
                                                     " is empty"));
    }
    s->token_ = absl::StrCat("Bearer ", t);
  }
  return std::shared_ptr<const TransportSecurity>(std::move(s));
}

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials() const {
  if (plaintext()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ca_;
  options.pem_key_cert_pairs.push_back({key_, cert_});
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(options);
  if (!token_.empty()) {
    credentials->SetAuthMetadataProcessor(std::make_shared<TokenCheck>(token_, refused_));
  }
  return credentials;
}

std::shared_ptr<grpc::ChannelCredentials> TransportSecurity::ChannelCredentials() const {
  if (plaintext()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_;
  options.pem_private_key = key_;
  options.pem_cert_chain = cert_;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
  if (token_.empty()) return credentials;
  return grpc::CompositeChannelCredentials(
      credentials, grpc::MetadataCredentialsFromPlugin(std::make_unique<TokenPlugin>(token_)));
}

void TransportSecurity::AddChannelArguments(grpc::ChannelArguments* args) const {
  if (!plaintext()) args->SetSslTargetNameOverride(kJobCertName);
}

}  // namespace cohort
