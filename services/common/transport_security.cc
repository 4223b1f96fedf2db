#include "services/common/transport_security.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <atomic>
#include <iostream>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "services/common/addresses.h"
#include "services/common/log_safe.h"
#include "trainer/io/whole_file.h"

namespace cohort {
namespace {

// The name every certificate of a job is issued for (tools/make_job_certs.sh).
constexpr char kJobCertName[] = "cohort";
constexpr char kAuthorization[] = "authorization";
// How long a verified client certificate is trusted before it is checked again, at most: never
// past its expiry.
constexpr absl::Duration kVerifiedFor = absl::Minutes(1);

absl::StatusOr<std::string> ReadJobFile(const std::string& path, absl::string_view what) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path,
                                            " (make a job's files with tools/make_job_certs.sh)"));
  }
  return text;
}

// A private key's or token's file: refused when users other than its owner and group may read
// or write it, as OpenSSH refuses such keys; the group may (Kubernetes mounts a Secret's files
// group-readable with an fsGroup).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view what) {
  absl::StatusOr<std::string> text = ReadJobFile(path, what);
  if (!text.ok()) return text;
  struct stat file{};
  if (stat(path.c_str(), &file) == 0 && (file.st_mode & S_IRWXO) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s %s is open to every user of this host (mode %04o): chmod 600 %s, and keep it so",
        what, path, file.st_mode & 07777, path));
  }
  return text;
}

// Equal without returning early, so the time taken tells nothing of the token.
bool IsPowerOfTen(int64_t n) {
  while (n > 1 && n % 10 == 0) n /= 10;
  return n == 1;
}

bool SameBytes(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

absl::string_view Said(Refusal reason) {
  switch (reason) {
    case Refusal::kNoCertificate:
      return "no client certificate (give it --tls_dir with this job's files)";
    case Refusal::kUntrustedCertificate:
      return "its certificate was not issued by this job's CA (is it a process of another job?)";
    case Refusal::kExpiredCertificate:
      return "its certificate has expired or is not valid yet (make new ones with "
             "tools/make_job_certs.sh)";
    case Refusal::kWrongCertificateUse:
      return "its certificate, from this job's CA, is not made for TLS clients (its "
             "extendedKeyUsage lacks clientAuth; make it with tools/make_job_certs.sh)";
    case Refusal::kNoToken:
      return "no job token (--token_file)";
    case Refusal::kWrongToken:
      return "the wrong job token (--token_file; is it a process of another job?)";
  }
  return "";
}

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
  void operator()(BIO* b) const { BIO_free(b); }
};

}  // namespace

absl::string_view RefusalName(Refusal reason) {
  switch (reason) {
    case Refusal::kNoCertificate: return "no_certificate";
    case Refusal::kUntrustedCertificate: return "untrusted_certificate";
    case Refusal::kExpiredCertificate: return "expired_certificate";
    case Refusal::kWrongCertificateUse: return "wrong_certificate_use";
    case Refusal::kNoToken: return "no_token";
    case Refusal::kWrongToken: return "wrong_token";
  }
  return "unknown";
}

// What every request to this process's servers is checked against, and the refusals counted.
class TransportSecurity::Gate {
 public:
  // ca_pem empty: no certificate check (plaintext); token empty: no token check.
  static absl::StatusOr<std::shared_ptr<Gate>> Make(const std::string& ca_pem,
                                                    std::string authorization) {
    std::shared_ptr<Gate> gate(new Gate(std::move(authorization)));
    if (ca_pem.empty()) return gate;
    gate->store_.reset(X509_STORE_new());
    std::unique_ptr<BIO, X509Free> bio(BIO_new_mem_buf(ca_pem.data(), ca_pem.size()));
    int loaded = 0;
    while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(gate->store_.get(), ca);
      X509_free(ca);
      ++loaded;
    }
    ERR_clear_error();  // the end of the PEM text reads as an error
    if (loaded == 0) return absl::InvalidArgumentError("holds no PEM certificate");
    return gate;
  }

  bool checks_certificates() const { return store_ != nullptr; }
  const std::string& authorization() const { return authorization_; }

  // The refusal of a call whose client presented these properties, if any.
  std::optional<Refusal> CheckCall(const grpc::AuthContext& peer,
                                   std::optional<absl::string_view> authorization,
                                   std::string* detail) {
    if (checks_certificates()) {
      const std::vector<grpc::string_ref> pem = peer.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
      if (pem.empty()) return Refusal::kNoCertificate;
      if (std::optional<Refusal> r = Verify(std::string(pem[0].data(), pem[0].size()), detail)) {
        return r;
      }
    }
    return CheckToken(authorization);
  }

  std::optional<Refusal> CheckToken(std::optional<absl::string_view> authorization) const {
    if (authorization_.empty()) return std::nullopt;
    if (!authorization.has_value()) return Refusal::kNoToken;
    if (!SameBytes(*authorization, authorization_)) return Refusal::kWrongToken;
    return std::nullopt;
  }

  void Count(Refusal reason, absl::string_view who, absl::string_view detail) {
    counts_[static_cast<int>(reason)].fetch_add(1);
    // One write: refusals come from more than one thread.
    std::cerr << absl::StrCat("refused ", who, ": ", Said(reason),
                              detail.empty() ? "" : absl::StrCat(" [", LogSafe(detail), "]"),
                              "\n")
              << std::flush;
  }

  int64_t count(Refusal reason) const { return counts_[static_cast<int>(reason)].load(); }

  void CountConnection(ConnectionRefusal reason, const std::string& peer, int port) {
    std::string address(HostOfAddress(peer));
    int64_t count = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!connection_peers_.contains(address)) {
        if (connection_peers_.size() >= TransportSecurity::kPeersCounted) {
          address = "other";
        } else {
          connection_peers_.insert(address);
        }
      }
      count = ++refused_connections_[{reason, address}];
    }
    if (count > 10 && !IsPowerOfTen(count)) return;
    std::cerr << absl::StrCat("refused a connection from ", peer, " to port ", port, ": ",
                              ConnectionRefusalSaid(reason),
                              count > 1 ? absl::StrCat(" (", count, " so from ", address, ")")
                                        : "",
                              "\n")
              << std::flush;
  }

  std::vector<TransportSecurity::RefusedConnections> refused_connections() const {
    absl::MutexLock lock(&mu_);
    std::vector<TransportSecurity::RefusedConnections> all;
    for (const auto& [key, count] : refused_connections_) {
      all.push_back({key.first, key.second, count});
    }
    return all;
  }

 private:
  explicit Gate(std::string authorization) : authorization_(std::move(authorization)) {}

  // Whether the certificate chains to the job's CA, is valid now and is made for clients (the
  // handshake proved the peer holds its key). Verified certificates are remembered for
  // kVerifiedFor, or until they expire if that is sooner.
  std::optional<Refusal> Verify(const std::string& pem, std::string* detail) {
    const absl::Time now = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      const auto it = verified_.find(pem);
      if (it != verified_.end() && now < it->second) return std::nullopt;
    }
    std::unique_ptr<BIO, X509Free> bio(BIO_new_mem_buf(pem.data(), pem.size()));
    std::unique_ptr<X509, X509Free> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) {
      ERR_clear_error();
      *detail = "unreadable certificate";
      return Refusal::kUntrustedCertificate;
    }
    std::unique_ptr<X509_STORE_CTX, X509Free> context(X509_STORE_CTX_new());
    X509_STORE_CTX_init(context.get(), store_.get(), cert.get(), nullptr);
    X509_STORE_CTX_set_purpose(context.get(), X509_PURPOSE_SSL_CLIENT);
    if (X509_verify_cert(context.get()) != 1) {
      const int error = X509_STORE_CTX_get_error(context.get());
      ERR_clear_error();
      char subject[256] = "";
      X509_NAME_oneline(X509_get_subject_name(cert.get()), subject, sizeof(subject));
      *detail = absl::StrCat(subject, ": ", X509_verify_cert_error_string(error));
      if (error == X509_V_ERR_CERT_HAS_EXPIRED || error == X509_V_ERR_CERT_NOT_YET_VALID) {
        return Refusal::kExpiredCertificate;
      }
      return error == X509_V_ERR_INVALID_PURPOSE ? Refusal::kWrongCertificateUse
                                                 : Refusal::kUntrustedCertificate;
    }
    absl::Time until = now + kVerifiedFor;
    if (std::tm expiry{}; ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &expiry) == 1) {
      until = std::min(until, absl::FromTM(expiry, absl::UTCTimeZone()));
    }
    absl::MutexLock lock(&mu_);
    if (verified_.size() > 1024) verified_.clear();  // a job has a few certificates
    verified_[pem] = until;
    return std::nullopt;
  }

  const std::string authorization_;  // "Bearer <token>", or empty
  std::unique_ptr<X509_STORE, X509Free> store_;
  std::array<std::atomic<int64_t>, kRefusalKinds> counts_{};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, absl::Time> verified_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> connection_peers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<ConnectionRefusal, std::string>, int64_t> refused_connections_
      ABSL_GUARDED_BY(mu_);
};

namespace {

// Runs the gate on every call before any service sees it.
class CallCheck final : public grpc::AuthMetadataProcessor {
 public:
  explicit CallCheck(std::shared_ptr<TransportSecurity::Gate> gate) : gate_(std::move(gate)) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata*) override {
    const auto it = metadata.find(kAuthorization);
    std::optional<absl::string_view> authorization;
    if (it != metadata.end()) authorization = absl::string_view(it->second.data(), it->second.size());
    std::string detail;
    const std::optional<Refusal> refusal = gate_->CheckCall(*context, authorization, &detail);
    if (!refusal.has_value()) {
      if (authorization.has_value()) {
        consumed->insert({kAuthorization, std::string(*authorization)});
      }
      return grpc::Status::OK;
    }
    std::string names;  // a peer's own words: escaped
    for (const grpc::string_ref& name : context->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      absl::StrAppend(&names, names.empty() ? "" : ",",
                      LogSafe(absl::string_view(name.data(), name.size()), 128));
    }
    gate_->Count(*refusal,
                 names.empty() ? "a call from a peer without a certificate name"
                               : absl::StrCat("a call from the peer with certificate '", names, "'"),
                 detail);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("refused by this job: ", Said(*refusal)));
  }

 private:
  const std::shared_ptr<TransportSecurity::Gate> gate_;
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
  static const auto* const plaintext = new std::shared_ptr<const TransportSecurity>(
      new TransportSecurity(*Gate::Make("", "")));
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
  const std::string base = absl::StrCat(options.tls_dir, "/");
  absl::StatusOr<std::string> ca = ReadJobFile(base + "ca.pem", "the job's CA certificate");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert =
      ReadJobFile(absl::StrCat(base, options.cert_name, ".pem"), "the certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      ReadSecretFile(absl::StrCat(base, options.cert_name, ".key"), "the private key");
  if (!key.ok()) return key.status();
  std::string authorization;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSecretFile(options.token_file, "the job token");
    if (!token.ok()) return token.status();
    const absl::string_view t = absl::StripAsciiWhitespace(*token);
    if (t.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the job token ", options.token_file,
                                                     " is empty"));
    }
    authorization = absl::StrCat("Bearer ", t);
  }
  absl::StatusOr<std::shared_ptr<Gate>> gate = Gate::Make(*ca, std::move(authorization));
  if (!gate.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job's CA certificate ", base, "ca.pem ", gate.status().message()));
  }
  std::shared_ptr<TransportSecurity> s(new TransportSecurity(*std::move(gate)));
  s->ca_ = *std::move(ca);
  s->cert_ = *std::move(cert);
  s->key_ = *std::move(key);
  return std::shared_ptr<const TransportSecurity>(std::move(s));
}

bool TransportSecurity::plaintext() const { return !gate_->checks_certificates(); }

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials() const {
  if (plaintext()) return grpc::InsecureServerCredentials();
  // The certificate is required in the handshake (its key proven) but verified by CallCheck.
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY);
  options.pem_root_certs = ca_;
  options.pem_key_cert_pairs.push_back({key_, cert_});
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(options);
  credentials->SetAuthMetadataProcessor(std::make_shared<CallCheck>(gate_));
  return credentials;
}

std::shared_ptr<grpc::ChannelCredentials> TransportSecurity::ChannelCredentials() const {
  if (plaintext()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_;
  options.pem_private_key = key_;
  options.pem_cert_chain = cert_;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
  if (gate_->authorization().empty()) return credentials;
  return grpc::CompositeChannelCredentials(
      credentials,
      grpc::MetadataCredentialsFromPlugin(std::make_unique<TokenPlugin>(gate_->authorization())));
}

void TransportSecurity::AddChannelArguments(grpc::ChannelArguments* args) const {
  if (!plaintext()) args->SetSslTargetNameOverride(kJobCertName);
}

bool TransportSecurity::AdmitHttp(absl::string_view authorization, absl::string_view peer,
                                  absl::string_view path) const {
  std::optional<absl::string_view> given;
  if (!authorization.empty()) given = authorization;
  const std::optional<Refusal> refusal = gate_->CheckToken(given);
  if (refusal.has_value()) {
    gate_->Count(*refusal, absl::StrCat("an HTTP request for ", path, " from ", peer), "");
  }
  return !refusal.has_value();
}

const std::string& TransportSecurity::authorization() const { return gate_->authorization(); }

int64_t TransportSecurity::refused_requests() const {
  int64_t total = 0;
  for (const auto& [reason, count] : refusals()) total += count;
  return total;
}

std::vector<std::pair<Refusal, int64_t>> TransportSecurity::refusals() const {
  std::vector<std::pair<Refusal, int64_t>> all;
  for (int r = 0; r < kRefusalKinds; ++r) {
    all.push_back({static_cast<Refusal>(r), gate_->count(static_cast<Refusal>(r))});
  }
  return all;
}

ConnectionGate::Refuse TransportSecurity::ConnectionRefusals(int port) const {
  return [gate = gate_, port](ConnectionRefusal reason, const std::string& peer) {
    gate->CountConnection(reason, peer, port);
  };
}

std::vector<TransportSecurity::RefusedConnections> TransportSecurity::refused_connections()
    const {
  return gate_->refused_connections();
}

}  // namespace cohort
