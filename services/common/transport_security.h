#ifndef COHORT_SERVICES_COMMON_TRANSPORT_SECURITY_H_
#define COHORT_SERVICES_COMMON_TRANSPORT_SECURITY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace cohort {

// How a process's gRPC servers and channels authenticate their peers (Contracts: --tls_dir,
// --token_file, --insecure).
struct SecurityOptions {
  bool insecure = true;   // plaintext, no token: only for a job on one machine's loopback
  std::string tls_dir;    // ca.pem, and <cert_name>.pem / <cert_name>.key (tools/make_job_certs.sh)
  std::string cert_name;  // this process's certificate, e.g. "scheduler", "shard", "worker"
  std::string token_file;  // the job token (empty: none), sent and checked on every call
};

// Loaded credentials. With TLS, servers require a client certificate from the job's CA and
// clients require the server's, both issued for the job-wide name "cohort" (tools/
// make_job_certs.sh), so peers are checked whatever address they are reached at; with a
// token, every call carries `authorization: Bearer <token>` and servers refuse a call without
// it (UNAUTHENTICATED, counted). A peer that fails the TLS handshake never reaches a service.
// Thread-safe.
class TransportSecurity {
 public:
  // Plaintext, no token.
  static std::shared_ptr<const TransportSecurity> Plaintext();
  // Reads the files; an error names the file and what to do. A token needs TLS.
  static absl::StatusOr<std::shared_ptr<const TransportSecurity>> Load(
      const SecurityOptions& options);

  bool plaintext() const { return ca_.empty(); }
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // What a channel needs besides its credentials (the name certificates are checked against).
  void AddChannelArguments(grpc::ChannelArguments* args) const;
  // Calls this process's servers refused for a missing or wrong token.
  int64_t refused_calls() const { return refused_->load(); }

 private:
  TransportSecurity() : refused_(std::make_shared<std::atomic<int64_t>>(0)) {}

  std::string ca_, cert_, key_, token_;
  std::shared_ptr<std::atomic<int64_t>> refused_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_TRANSPORT_SECURITY_H_
