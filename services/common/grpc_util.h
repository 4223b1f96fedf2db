#ifndef COHORT_SERVICES_COMMON_GRPC_UTIL_H_
#define COHORT_SERVICES_COMMON_GRPC_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the port it bound (the requested one, or the kernel's choice for 0)
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
