#ifndef COHORT_TRAINER_BASE_THREAD_STACK_TLS_H_
#define COHORT_TRAINER_BASE_THREAD_STACK_TLS_H_

#include <cstddef>

namespace cohort {

// Thread stacks as large as asked, whatever static TLS the process carries.
//
// glibc carves a thread's static TLS (the thread_local data of the executable and of every
// library loaded at start) out of the stack size a pthread_attr_t asks for, and refuses to
// create the thread (EINVAL) when it does not fit. cuBLAS brings about 100 KiB of it, more than
// a library's small thread stacks hold (Debian's civetweb asked for 100 KiB), so a binary linked
// with the GPU backend could not start such threads. Linking //trainer/base:thread_stack_tls into a binary
// replaces pthread_attr_setstacksize for every library in the process: the binary exports its
// own, which adds StaticTlsBytes() to the size asked for and calls glibc's.

// The static TLS of the modules loaded now (each PT_TLS segment's size, rounded up to its
// alignment).
size_t StaticTlsBytes();

}  // namespace cohort

#endif  // COHORT_TRAINER_BASE_THREAD_STACK_TLS_H_
