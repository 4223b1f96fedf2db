#include "services/wire/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// What one mapping writes, the other reads: the memory the memfd holds, at its size.
TEST(ShmRegionTest, AnAttachedRegionIsTheSameMemory) {
  auto made = ShmRegion::Create(1 << 16, "a test region");
  ASSERT_TRUE(made.ok()) << made.status();
  auto attached = ShmRegion::Attach(dup((*made)->fd()), "a test region");
  ASSERT_TRUE(attached.ok()) << attached.status();
  ASSERT_EQ((*attached)->size(), size_t{1} << 16);
  ASSERT_NE((*attached)->data(), (*made)->data());  // two mappings
  const std::string words = "written on one side";
  std::memcpy((*made)->data() + 1000, words.data(), words.size());
  EXPECT_EQ(std::string((*attached)->data() + 1000, words.size()), words);
  // Sealed: neither side can change its size under the other's mapping.
  EXPECT_NE(ftruncate((*attached)->fd(), 4096), 0);
  EXPECT_NE(ftruncate((*made)->fd(), 1 << 20), 0);
}

// Memory another process could shrink under this one's mapping is refused, its fd closed.
TEST(ShmRegionTest, AnUnsealedMemfdIsRefusedAndClosed) {
  const int unsealed = memfd_create("not-sealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  auto attached = ShmRegion::Attach(unsealed, "a test region");
  EXPECT_EQ(attached.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(attached.status().message().find("the descriptor passed as a test region is not"),
            std::string::npos)
      << attached.status();
  EXPECT_EQ(fcntl(unsealed, F_GETFD), -1);  // closed
}

}  // namespace
}  // namespace cohort
