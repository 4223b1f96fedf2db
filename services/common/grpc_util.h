#ifndef COHORT_SERVICES_COMMON_GRPC_UTIL_H_
#define COHORT_SERVICES_COMMON_GRPC_UTIL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/common/connection_gate.h"
#include "services/common/transport_security.h"

namespace cohort {

// Both ends raise gRPC's message limit to this (Contracts, "Parts on the wire"): a 1 MiB part
// and its header sit far below it; a 4 MiB part would not fit gRPC's default.
constexpr int kMaxMessageBytes = 16 << 20;

// absl::Status <-> grpc::Status; only service adapters and clients convert.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// A channel to host:port with the raised message limit, authenticated as security says.
std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& address,
    const TransportSecurity& security = *TransportSecurity::Plaintext());

// A gRPC server behind a ConnectionGate: the gate accepts its connections and refuses, counted on
// the security's ledger with the peer's address, those that do not open as the job's transport
// does (plaintext on a TLS port, TLS on a plaintext one, silence, a flood of waiting ones).
struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the port it bound (the requested one, or the kernel's choice for 0)
  std::unique_ptr<ConnectionGate> gate;
  std::shared_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;

  // Stops accepting, then shuts the server down: calls still running get until `deadline`.
  void Shutdown(std::chrono::system_clock::time_point deadline = std::chrono::system_clock::now());
};

// Starts a server for the services on bind_host:port (port 0: the kernel picks one; Contracts,
// "Ports"). Error naming the address when it cannot listen.
absl::StatusOr<RunningServer> StartServer(
    const std::string& bind_host, int port, const std::vector<grpc::Service*>& services,
    const TransportSecurity& security = *TransportSecurity::Plaintext());

// The host part of a gRPC peer string ("ipv4:10.0.0.2:5000" → "10.0.0.2",
// "ipv6:[::1]:5000" → "[::1]"); empty when it is not an IP peer.
std::string PeerHost(const std::string& peer);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_GRPC_UTIL_H_
