#include "trainer/base/thread_stack_tls.h"

#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <cstring>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// 256 KiB of static TLS: more than a 128 KiB stack can hold, as cuBLAS's is more than civetweb's
// 100 KiB stacks can.
constexpr size_t kTlsBytes = 256 << 10;
constexpr size_t kStackBytes = 128 << 10;
thread_local char big_tls[kTlsBytes];

void* UseStackAndTls(void*) {
  volatile char frame[kStackBytes / 2];  // half the stack asked for must be usable
  std::memset(const_cast<char*>(frame), 1, sizeof(frame));
  std::memset(big_tls, 2, sizeof(big_tls));
  return reinterpret_cast<void*>(static_cast<uintptr_t>(frame[0] + big_tls[kTlsBytes - 1]));
}

int StartAndJoin(pthread_attr_t* attr) {
  pthread_t thread;
  if (const int rc = pthread_create(&thread, attr, UseStackAndTls, nullptr); rc != 0) return rc;
  void* result = nullptr;
  pthread_join(thread, &result);
  return reinterpret_cast<uintptr_t>(result) == 3 ? 0 : -1;
}

TEST(ThreadStackTlsTest, CountsTheExecutablesTls) {
  EXPECT_GE(StaticTlsBytes(), kTlsBytes);
}

TEST(ThreadStackTlsTest, ASmallStackFitsBesideALargeTls) {
  // glibc's own function: the TLS does not fit in the stack, and the thread is refused.
  using SetStackSize = int (*)(pthread_attr_t*, size_t);
  auto glibc = reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  ASSERT_NE(glibc, nullptr);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  ASSERT_EQ(glibc(&attr, kStackBytes), 0);
  EXPECT_EQ(StartAndJoin(&attr), EINVAL);
  // The process's (what every library calls): the stack asked for, and the TLS beside it.
  ASSERT_EQ(pthread_attr_setstacksize(&attr, kStackBytes), 0);
  EXPECT_EQ(StartAndJoin(&attr), 0);
  pthread_attr_destroy(&attr);
}

}  // namespace
}  // namespace cohort
