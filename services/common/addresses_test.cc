#include "services/common/addresses.h"

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

TEST(AddressesTest, TheHostOfAnAddress) {
  EXPECT_EQ(HostOfAddress("10.0.0.1:7000"), "10.0.0.1");
  EXPECT_EQ(HostOfAddress("node1:7000"), "node1");
  EXPECT_EQ(HostOfAddress("[::1]:7000"), "[::1]");
  EXPECT_EQ(HostOfAddress("node1"), "node1");
  EXPECT_EQ(HostOfAddress("::1"), "::1");
}

}  // namespace
}  // namespace cohort
