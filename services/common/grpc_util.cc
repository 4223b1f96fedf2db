#include "services/common/grpc_util.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/common/listen_socket.h"

namespace cohort {

namespace {

constexpr int kHandshakeTimeoutMs = 10'000;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                          const TransportSecurity& security) {
  grpc::ChannelArguments args;
  // A connection of its own, as a process of its own would have: gRPC would otherwise carry
  // every channel a process opens to one address over one connection (a test's or the
  // simulator's members, a thousand workers' streams on one socket).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  security.AddChannelArguments(&args);
  return grpc::CreateCustomChannel(address, security.ChannelCredentials(), args);
}

absl::StatusOr<RunningServer> StartServer(const std::string& bind_host, int port,
                                          const std::vector<grpc::Service*>& services,
                                          const TransportSecurity& security) {
  absl::StatusOr<ListenSocket> socket = ListenSocket::Open(bind_host, port);
  if (!socket.ok()) return socket.status();
  RunningServer running;
  running.port = socket->port();
  const int listener_fd = socket->fd();
  grpc::ServerBuilder builder;
  running.acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      security.ServerCredentials());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // A connection that opened right but stalls in its handshake: gRPC's default waits 120 s.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kHandshakeTimeoutMs);
  for (grpc::Service* s : services) builder.RegisterService(s);
  running.server = builder.BuildAndStart();
  if (running.server == nullptr) {
    return absl::InternalError(absl::StrCat("cannot start the gRPC server on ", bind_host, ":",
                                            running.port));
  }
  // Every worker of a job dials each shard at once, a thousand from a few hosts (or one).
  ConnectionLimits limits;
  limits.max_connections = 8192;
  limits.peer_grace = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<ConnectionGate>> gate = ConnectionGate::Start(
      *std::move(socket), security.opening(), limits,
      [acceptor = running.acceptor, listener_fd](int fd) {
        grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
        connection.listener_fd = listener_fd;
        connection.fd = fd;
        acceptor->HandleNewConnection(&connection);
      },
      security.ConnectionRefusals(running.port));
  if (!gate.ok()) {
    running.server->Shutdown();
    return gate.status();
  }
  running.gate = *std::move(gate);
  return running;
}

void RunningServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  gate.reset();  // first: a connection handed over after the server shut down would leak
  if (server != nullptr) server->Shutdown(deadline);
}

std::string PeerHost(const std::string& peer) {
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) return "";
  const std::string rest = peer.substr(5);
  const size_t colon = rest.rfind(':');
  return colon == std::string::npos ? rest : rest.substr(0, colon);
}

}  // namespace cohort
