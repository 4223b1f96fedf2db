#ifndef COHORT_SERVICES_COMMON_TRANSPORT_SECURITY_H_
#define COHORT_SERVICES_COMMON_TRANSPORT_SECURITY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/common/connection_gate.h"

namespace cohort {

// How a process's gRPC servers and channels authenticate their peers (Contracts: --tls_dir,
// --token_file, --insecure).
struct SecurityOptions {
  bool insecure = true;   // plaintext, no token: only for a job on one machine's loopback
  std::string tls_dir;    // ca.pem, and <cert_name>.pem / <cert_name>.key (tools/make_job_certs.sh)
  std::string cert_name;  // this process's certificate, e.g. "scheduler", "shard", "worker"
  std::string token_file;  // the job token (empty: none), sent and checked on every call
};

// Why a peer was refused: the label of cohort_refused_requests_total{reason}.
enum class Refusal { kNoCertificate, kUntrustedCertificate, kExpiredCertificate,
                     kWrongCertificateUse, kNoToken, kWrongToken };
inline constexpr int kRefusalKinds = 6;
absl::string_view RefusalName(Refusal reason);  // "no_certificate", ...

// Loaded credentials. With TLS, every call to this process's servers must come over TLS with a
// client certificate issued by the job's CA and still valid, and clients require the server's;
// certificates are issued for the job-wide name "cohort" (tools/make_job_certs.sh), so peers
// are checked whatever address they are reached at. With a token, every call carries
// `authorization: Bearer <token>`, and so must every HTTP request for /status or /metrics.
// The client certificate is checked per call rather than in the handshake so that a refused
// peer is logged with the reason and counted; a refused call never reaches a service.
// Thread-safe.
class TransportSecurity {
 public:
  // Plaintext, no token.
  static std::shared_ptr<const TransportSecurity> Plaintext();
  // Reads the files; an error names the file and what to do. A token needs TLS.
  static absl::StatusOr<std::shared_ptr<const TransportSecurity>> Load(
      const SecurityOptions& options);

  bool plaintext() const;
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // What a channel needs besides its credentials (the name certificates are checked against).
  void AddChannelArguments(grpc::ChannelArguments* args) const;

  // Whether an HTTP request from `peer` (address) for `path` with this Authorization header
  // may be answered: always without a token; with one, only "Bearer <token>". A refusal is
  // logged and counted like a refused call.
  bool AdmitHttp(absl::string_view authorization, absl::string_view peer,
                 absl::string_view path) const;
  // The PEM text loaded (empty when plaintext): the job's CA, this process's certificate and
  // its key; the HTTP server serves HTTPS with them.
  const std::string& ca_pem() const { return ca_; }
  const std::string& certificate_pem() const { return cert_; }
  const std::string& key_pem() const { return key_; }
  // "Bearer <token>" (empty without a token): what a client sends.
  const std::string& authorization() const;

  // Requests (calls and HTTP) this process refused, in all and by reason.
  int64_t refused_requests() const;
  std::vector<std::pair<Refusal, int64_t>> refusals() const;

  // What a ConnectionGate on `port` reports its refusals to: counted by reason and peer address,
  // and logged with the peer (the first ten of a reason and address, then every power of ten).
  ConnectionGate::Refuse ConnectionRefusals(int port) const;
  // The opening a gRPC server of this process expects from its connections.
  Opening opening() const { return plaintext() ? Opening::kHttp2 : Opening::kTls; }
  struct RefusedConnections {
    ConnectionRefusal reason;
    std::string peer;  // the address without its port; "other" past kPeersCounted addresses
    int64_t count;
  };
  static constexpr int kPeersCounted = 64;  // bounds the metric's series under a scan
  std::vector<RefusedConnections> refused_connections() const;

  class Gate;  // the checks, shared with the servers' credentials

 private:
  explicit TransportSecurity(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}

  std::string ca_, cert_, key_;
  std::shared_ptr<Gate> gate_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_TRANSPORT_SECURITY_H_
