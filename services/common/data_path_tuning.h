#ifndef COHORT_SERVICES_COMMON_DATA_PATH_TUNING_H_
#define COHORT_SERVICES_COMMON_DATA_PATH_TUNING_H_

#include "absl/status/status.h"

namespace cohort {

// Settings of a process on the data path (shard, worker). Call first thing in its main.
//  - glibc keeps freed memory instead of handing it back to the kernel: gRPC frees its
//    multi-MiB receive buffers after each message, and without this every receive faults in
//    fresh pages (measured: push+pull of 100 MB rises from about 70% to over 100% of
//    single-stream TCP; see ../docs/benchmarks.md). Buffers of up to 32 MiB stay on the heap
//    instead of separately mapped, and one arena lets memory freed on gRPC's threads be reused
//    on the caller's.
//  - absl's mutexes skip their deadlock bookkeeping (SkipMutexDeadlockBookkeeping).
//  - Every thread runs under SCHED_BATCH (RunAsBatch), unless the environment has
//    COHORT_SCHED_BATCH=0 (exactly "0"); where the kernel refuses, a warning names the thread
//    and the process goes on.
void TuneForDataPath();

// absl's mutexes skip their deadlock bookkeeping (a graph of every lock order seen, updated on
// each acquisition when the library is built for debugging, as Debian's is): a small part takes
// several locks on its way, and the graph cost a tenth of the CPU of a small-tensor round
// (docs/benchmarks.md, "Cheaper messages"); the scheduler takes its core's lock on each of a
// thousand members' heartbeats a second. Tests keep it on, and so does a process started with
// COHORT_MUTEX_DEADLOCK_DETECTION=1 (it then dies naming a lock-order cycle).
void SkipMutexDeadlockBookkeeping();

// Puts every thread of this process, and so every thread they start later, under Linux's
// SCHED_BATCH policy: a thread that wakes up no longer preempts one that is computing, it
// takes its turn when that one blocks or its time slice ends. Where a job's processes share
// the cores (the local launcher's job on a laptop), each message's handling on gRPC's threads
// otherwise interrupts a worker's forward or backward pass, and gRPC's threads preempt each
// other as they hand a message on (docs/benchmarks.md, "The data path under SCHED_BATCH",
// measured on two shared cores). Fails naming the thread the kernel refused (a seccomp
// profile, say); threads already set stay so.
absl::Status RunAsBatch();

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_DATA_PATH_TUNING_H_
