#include "trainer/base/thread_stack_tls.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cstdint>

#include "trainer/base/check.h"

namespace cohort {

size_t StaticTlsBytes() {
  size_t total = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& h = info->dlpi_phdr[i];
          if (h.p_type != PT_TLS) continue;
          const size_t align = h.p_align > 0 ? h.p_align : 1;
          *static_cast<size_t*>(data) += (h.p_memsz + align - 1) / align * align;
        }
        return 0;
      },
      &total);
  return total;
}

}  // namespace cohort

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t stacksize) noexcept {
  using SetStackSize = int (*)(pthread_attr_t*, size_t);
  static const SetStackSize glibc =
      reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  COHORT_CHECK(glibc != nullptr, "no pthread_attr_setstacksize after this binary's: %s",
               dlerror());
  // Measured once, at the first thread that asks: the libraries loaded at start are all there.
  static const size_t tls = cohort::StaticTlsBytes();
  // A size too small for glibc stays too small (EINVAL); one near SIZE_MAX stays near it.
  if (stacksize < static_cast<size_t>(PTHREAD_STACK_MIN)) return glibc(attr, stacksize);
  return glibc(attr, stacksize > SIZE_MAX - tls ? SIZE_MAX : stacksize + tls);
}
