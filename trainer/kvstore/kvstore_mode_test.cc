#include "trainer/kvstore/kvstore_mode.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(KVStoreModeTest, EveryNameRoundTrips) {
  for (KVStoreMode mode : {KVStoreMode::kLocal, KVStoreMode::kDistSync, KVStoreMode::kDistAsync}) {
    auto parsed = ParseKVStoreMode(KVStoreModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
}

TEST(KVStoreModeTest, AnUnknownNameIsRefusedNamingIt) {
  auto parsed = ParseKVStoreMode("dist-sync");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("'dist-sync'"), absl::string_view::npos);
}

}  // namespace
}  // namespace cohort
