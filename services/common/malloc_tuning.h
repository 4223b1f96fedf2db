#ifndef COHORT_SERVICES_COMMON_MALLOC_TUNING_H_
#define COHORT_SERVICES_COMMON_MALLOC_TUNING_H_

namespace cohort {

// Keeps glibc from handing freed memory back to the kernel: gRPC frees its multi-MiB receive
// buffers after each message, and without this every receive faults in fresh pages (measured:
// push+pull of 100 MB rises from about 70% to over 100% of single-stream TCP; see
// ../docs/benchmarks.md). Also keeps buffers of up to 32 MiB on the heap instead of
// separately mapped, and uses one arena so memory freed on gRPC's threads is reused on the
// caller's. Call first thing in main of a process on the data path (shard, worker).
void TuneMallocForBulkTransfers();

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_MALLOC_TUNING_H_
