#include "services/common/addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(AddressesTest, LoopbackAddressesAreTheOnesNoOtherMachineReaches) {
  for (const char* a : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]",
                        "node.localhost"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"10.0.0.1", "node1", "node127", "fe80::1", "[2001:db8::1]", "128.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(AddressesTest, AnyAddressIsEveryInterfacesAtOnce) {
  for (const char* a : {"", "0.0.0.0", "::", "[::]"}) EXPECT_TRUE(IsAnyAddress(a)) << a;
  for (const char* a : {"127.0.0.1", "10.0.0.1", "::1", "localhost"}) {
    EXPECT_FALSE(IsAnyAddress(a)) << a;
  }
}

TEST(AddressesTest, TheHostOfAnAddress) {
  EXPECT_EQ(HostOfAddress("10.0.0.1:7000"), "10.0.0.1");
  EXPECT_EQ(HostOfAddress("node1:7000"), "node1");
  EXPECT_EQ(HostOfAddress("[::1]:7000"), "[::1]");
  EXPECT_EQ(HostOfAddress("node1"), "node1");
  EXPECT_EQ(HostOfAddress("::1"), "::1");
}

TEST(AddressesTest, ThisHostsAddressesAreItsInterfaces) {
  EXPECT_TRUE(IsThisHostsAddress("127.0.0.1"));
  EXPECT_TRUE(IsThisHostsAddress("localhost"));
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  EXPECT_TRUE(IsThisHostsAddress(name));
  // Every IPv4 address of this namespace's interfaces.
  ifaddrs* interfaces = nullptr;
  ASSERT_EQ(getifaddrs(&interfaces), 0);
  for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof text);
    EXPECT_TRUE(IsThisHostsAddress(text)) << text;
  }
  freeifaddrs(interfaces);
  EXPECT_FALSE(IsThisHostsAddress("192.0.2.1"));  // TEST-NET-1: documentation only
  EXPECT_FALSE(IsThisHostsAddress("[2001:db8::1]"));
  EXPECT_FALSE(IsThisHostsAddress("some-other-node"));
}

TEST(AddressesTest, ThePortOfAnAddress) {
  EXPECT_EQ(PortOfAddress("10.0.0.1:7000"), 7000);
  EXPECT_EQ(PortOfAddress("[::1]:7001"), 7001);
  EXPECT_EQ(PortOfAddress("node1"), -1);
  EXPECT_EQ(PortOfAddress("::1"), -1);
  EXPECT_EQ(PortOfAddress("[::1]"), -1);
  EXPECT_EQ(HostOfAddress("[::1]"), "[::1]");
  EXPECT_EQ(HostOfAddress("[::1]:7001"), "[::1]");
  EXPECT_EQ(PortOfAddress("node1:http"), -1);
}

TEST(AddressesTest, AddressesToDialAreNamesOrAddressesWithAnOptionalPort) {
  for (const char* good : {"shard0.example", "shard0.example:30002", "10.0.0.2", "10.0.0.2:7000",
                           "[::1]", "[fe80::1]:7000", "node-1"}) {
    EXPECT_TRUE(CheckDialAddress(good).ok()) << good << ": " << CheckDialAddress(good);
  }
  struct Bad {
    std::string address;
    const char* why;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"evil\nhost:1", "'\\n' cannot be in one"},
           {"-oProxyCommand=x", "starts with '-'"},
           {"node_1:7000", "'_' cannot be in one"},
           {"node1:http", "the port is not a number"},
           {"node1:70000", "the port is not a number"},
           {"[not-v6]:7000", "the brackets hold no IPv6 address"},
           {"::1", "':' cannot be in one"},
           {"10.1", "ends in a number"},
           {std::string("10.0.0.5\0x", 10), "cannot be in one"},
           {std::string(300, 'a'), "over 253 characters"}}) {
    const absl::Status s = CheckDialAddress(bad.address);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.address;
    EXPECT_TRUE(absl::StrContains(s.message(), bad.why)) << s;
    EXPECT_EQ(s.message().find('\n'), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace cohort
