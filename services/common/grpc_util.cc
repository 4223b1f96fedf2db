#include "services/common/grpc_util.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace cohort {

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
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  security.AddChannelArguments(&args);
  return grpc::CreateCustomChannel(address, security.ChannelCredentials(), args);
}

absl::StatusOr<RunningServer> StartServer(const std::string& bind_host, int port,
                                          const std::vector<grpc::Service*>& services,
                                          const TransportSecurity& security) {
  const std::string address = absl::StrCat(bind_host, ":", port);
  RunningServer running;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, security.ServerCredentials(), &running.port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // gRPC sets SO_REUSEPORT by default: a second server would share a taken port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* s : services) builder.RegisterService(s);
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || running.port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address, ": the address is in use or not on this host; pick "
        "another --port (0 lets the system choose) or --bind"));
  }
  return running;
}

std::string PeerHost(const std::string& peer) {
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) return "";
  const std::string rest = peer.substr(5);
  const size_t colon = rest.rfind(':');
  return colon == std::string::npos ? rest : rest.substr(0, colon);
}

}  // namespace cohort
