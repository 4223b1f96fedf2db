#include "services/common/grpc_util.h"

#include <fstream>

#include "gtest/gtest.h"
#include "proto/shard.grpc.pb.h"

namespace cohort {
namespace {

TEST(GrpcUtilTest, StatusRoundTripsWithCodeAndMessage) {
  const absl::Status s = absl::FailedPreconditionError("key 3 part 1 is at version 7");
  const grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(FromGrpcStatus(g), s);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(GrpcUtilTest, PeerHostTakesTheAddressWithoutThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.2:5000"), "10.0.0.2");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5000"), "[::1]");
  EXPECT_EQ(PeerHost("unix:/tmp/socket"), "");
}

TEST(GrpcUtilTest, ServerOnPortZeroReportsThePortItGot) {
  v1::Shard::Service service;  // any service: a server needs one
  auto server = StartServer("127.0.0.1", 0, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT(server->port, 0);
  // The port is taken: a second server asking for it cannot listen, and says where.
  v1::Shard::Service other;
  auto second = StartServer("127.0.0.1", server->port, {&other});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(server->port)),
            std::string::npos);
  server->Shutdown();
}

}  // namespace
}  // namespace cohort
