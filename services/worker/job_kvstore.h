#ifndef COHORT_SERVICES_WORKER_JOB_KVSTORE_H_
#define COHORT_SERVICES_WORKER_JOB_KVSTORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/common/transport_security.h"
#include "services/membership/member_session.h"
#include "services/worker/dist_kvstore.h"
#include "services/worker/dist_kvstore_core.h"
#include "trainer/kvstore/kvstore.h"

namespace cohort {

// Small pushes wait up to 1 ms to be fused (docs/benchmarks.md, "Small tensors").
inline constexpr absl::Duration kDefaultFusionWait = absl::Milliseconds(1);

// How a worker finds and joins its job.
struct JobOptions {
  // The session options of a worker with these settings.
  MemberSessionOptions SessionOptions() const;
  // The data path's settings.
  DistKVStoreOptions KVStoreOptions() const;

  std::string scheduler_address;  // host:port
  int requested_rank = -1;        // -1: the scheduler assigns one
  int64_t part_bytes = 1 << 20;   // parameters are split into parts of at most this
  int64_t fusion_bytes = kDefaultFusionBytes;  // DistKVStoreOptions::fusion_bytes
  // How long a small push on an idle stream may wait for others to fuse with (0: never); a
  // wait for answers sends what waits at once.
  absl::Duration fusion_wait = kDefaultFusionWait;
  GradientCompression compression;             // --gradient_compression
  // Pushes to shards on this host through shared memory (COHORT_SHARED_MEMORY=0: gRPC only).
  bool shared_memory = true;
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration scheduler_grace = absl::Seconds(3);
  // How the scheduler and the shards are dialled.
  std::shared_ptr<const TransportSecurity> security = TransportSecurity::Plaintext();
  // Where the worker serves /metrics (port 0: one the system picks), and writes the port it got
  // (empty: nowhere).
  std::string metrics_bind = "0.0.0.0";
  int metrics_port = 0;
  std::string metrics_port_file;
};

// The job the launcher hands a worker program in COHORT_* variables (Contracts, "Your own
// training program"): COHORT_SCHEDULER, COHORT_RANK, COHORT_PART_BYTES, COHORT_FUSION_BYTES,
// COHORT_FUSION_WAIT_US, COHORT_GRADIENT_COMPRESSION, COHORT_SHARED_MEMORY, COHORT_METRICS_BIND,
// COHORT_METRICS_PORT, COHORT_METRICS_PORT_FILE, and the transport's security: COHORT_TLS_DIR (with the worker's
// certificate, worker.pem/worker.key) and COHORT_TOKEN_FILE, or COHORT_INSECURE=1 for
// plaintext; one of the two must be given. The one place that reads the environment.
// scheduler: the address given on the command line, if any; without it COHORT_SCHEDULER must
// name one. InvalidArgument naming the variable when it is missing or malformed.
// security: given on the command line, if at all; then the COHORT_* security is not read.
absl::StatusOr<JobOptions> JobOptionsFromEnvironment(
    const std::string& scheduler = "",
    std::shared_ptr<const TransportSecurity> security = nullptr);

namespace kvstore {

// The kvstore a training program uses: "local" (this process), or "dist_sync"/"dist_async",
// which join the job at options.scheduler_address as a worker. Holds the job membership (and
// its heartbeat) for its lifetime and tells the scheduler this worker finished when destroyed
// (a program that fails should exit non-zero: the launcher then fails the job). The job's
// mode (the scheduler's --mode) must equal type.
//   auto options = JobOptionsFromEnvironment();
//   auto kv = kvstore::Create("dist_sync", *options);
absl::StatusOr<std::unique_ptr<KVStore>> Create(absl::string_view type, const JobOptions& options);

}  // namespace kvstore

// A distributed kvstore ("dist_sync" or "dist_async") over gRPC on a membership the caller
// holds (and ends with MemberSession::Leave, reporting how the program went). The session must
// outlive the store. The job's mode must equal type. Of options, only the data-path settings
// count. wrap_transport, when given, takes the gRPC transport and returns the one the store
// uses (tests put a delaying or failing transport around it).
using TransportWrapper =
    std::function<std::unique_ptr<ShardTransport>(std::unique_ptr<ShardTransport>)>;
absl::StatusOr<std::unique_ptr<KVStore>> CreateDistKVStore(
    absl::string_view type, MemberSession* session, const JobOptions& options,
    const TransportWrapper& wrap_transport = nullptr);

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_JOB_KVSTORE_H_
