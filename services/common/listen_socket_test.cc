#include "services/common/listen_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Whether a client of `family` reaches `address`:port.
bool Connects(int family, const char* address, int port) {
  const int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_storage to{};
  socklen_t length = 0;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&to);
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, address, &in->sin_addr);
    length = sizeof(*in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&to);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET6, address, &in6->sin6_addr);
    length = sizeof(*in6);
  }
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&to), length) == 0;
  close(fd);
  return connected;
}

bool HasIpv6Loopback() {
  auto socket = ListenSocket::Open("::1", 0);
  return socket.ok();
}

TEST(ListenSocketTest, PortZeroGetsAPortAndATakenPortIsRefusedNamingTheAddress) {
  auto first = ListenSocket::Open("127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(first->port(), 0);
  EXPECT_TRUE(Connects(AF_INET, "127.0.0.1", first->port()));
  auto second = ListenSocket::Open("127.0.0.1", first->port());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(first->port())),
            std::string::npos)
      << second.status();
}

TEST(ListenSocketTest, EveryAddressListensOnBothFamiliesAsGrpcDoes) {
  auto any = ListenSocket::Open("0.0.0.0", 0);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_TRUE(Connects(AF_INET, "127.0.0.1", any->port()));
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_TRUE(Connects(AF_INET6, "::1", any->port()));
}

TEST(ListenSocketTest, ABracketedIpv6AddressListensThereOnly) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  auto socket = ListenSocket::Open("[::1]", 0);
  ASSERT_TRUE(socket.ok()) << socket.status();
  EXPECT_TRUE(Connects(AF_INET6, "::1", socket->port()));
  EXPECT_FALSE(Connects(AF_INET, "127.0.0.1", socket->port()));
}

TEST(ListenSocketTest, ClosedWhenDestroyedButNotWhenReleased) {
  int port = 0;
  int released = -1;
  {
    auto socket = ListenSocket::Open("127.0.0.1", 0);
    ASSERT_TRUE(socket.ok());
    port = socket->port();
  }
  EXPECT_FALSE(Connects(AF_INET, "127.0.0.1", port));
  {
    auto socket = ListenSocket::Open("127.0.0.1", 0);
    ASSERT_TRUE(socket.ok());
    port = socket->port();
    released = socket->Release();
  }
  EXPECT_TRUE(Connects(AF_INET, "127.0.0.1", port));
  close(released);
}

TEST(ListenSocketTest, AddressTextWritesBothFamilies) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(5000);
  inet_pton(AF_INET, "10.0.0.2", &in.sin_addr);
  EXPECT_EQ(SocketAddressText(reinterpret_cast<sockaddr*>(&in), true), "10.0.0.2:5000");
  EXPECT_EQ(SocketAddressText(reinterpret_cast<sockaddr*>(&in), false), "10.0.0.2");
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(5000);
  inet_pton(AF_INET6, "::1", &in6.sin6_addr);
  EXPECT_EQ(SocketAddressText(reinterpret_cast<sockaddr*>(&in6), true), "[::1]:5000");
  EXPECT_EQ(SocketAddressText(reinterpret_cast<sockaddr*>(&in6), false), "::1");
}

}  // namespace
}  // namespace cohort
