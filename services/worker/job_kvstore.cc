#include "services/worker/job_kvstore.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/grpc_util.h"
#include "services/worker/grpc_shard_transport.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

// Leaves the job as finished when the store it is a base of is gone (bases are destroyed after
// the class they are listed before).
struct OwnedSession {
  ~OwnedSession() { session->Leave(absl::OkStatus()); }
  std::unique_ptr<MemberSession> session;
};

// The shards as the scheduler lists them, and the transport dialled to them.
struct ShardConnection {
  ShardsView shards;
  std::unique_ptr<ShardTransport> transport;
};

// kvstore::Create's store: the membership lives and ends with it.
class SessionOwningKVStore final : private OwnedSession, public DistKVStore {
 public:
  SessionOwningKVStore(std::unique_ptr<MemberSession> session, KVStoreMode mode,
                       ShardConnection shards, const DistKVStoreOptions& options)
      : OwnedSession{std::move(session)},
        DistKVStore(mode, OwnedSession::session.get(), std::move(shards.transport),
                    std::move(shards.shards), options) {}
};

// The mode a distributed store of `type` runs, checked against the job's.
absl::StatusOr<KVStoreMode> DistMode(absl::string_view type, const MemberSession& session) {
  const absl::StatusOr<KVStoreMode> mode = ParseKVStoreMode(type);
  if (!mode.ok() || *mode == KVStoreMode::kLocal) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_store=", type, ": expected local, dist_sync or dist_async"));
  }
  if (type != session.mode()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_store=", type, ", but job ",
                                                   session.job_id(), " runs ", session.mode(),
                                                   " (the scheduler's --mode)"));
  }
  return *mode;
}

absl::Status ValidateDataPath(const JobOptions& options) {
  if (options.part_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--part_bytes=", options.part_bytes, " (or COHORT_PART_BYTES): must be at least 1"));
  }
  if (options.fusion_wait < absl::ZeroDuration() || options.fusion_wait > absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fusion_wait_us=", absl::ToInt64Microseconds(options.fusion_wait),
                     " (or COHORT_FUSION_WAIT_US): must be 0 (never wait) to 1000000"));
  }
  // A fused message stays well within gRPC's message limit, headers included.
  if (options.fusion_bytes < 0 || options.fusion_bytes > kMaxMessageBytes / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fusion_bytes=", options.fusion_bytes,
                     " (or COHORT_FUSION_BYTES): must be 0 (no fusion) to ", kMaxMessageBytes / 2));
  }
  return absl::OkStatus();
}

// An environment variable holding an integer, if set.
absl::Status ReadInt64Variable(const char* name, int64_t* out) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return absl::OkStatus();
  if (!absl::SimpleAtoi(text, out)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", text, "' is not a number"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardConnection> ConnectToShards(MemberSession* session, const JobOptions& options,
                                                const TransportWrapper& wrap_transport) {
  ShardConnection c;
  ASSIGN_OR_RETURN(c.shards, session->WaitForShards());
  c.transport = MakeGrpcShardTransport(c.shards.addresses, options.security, options.fusion_bytes,
                                       options.fusion_wait, options.shared_memory);
  if (wrap_transport) c.transport = wrap_transport(std::move(c.transport));
  return c;
}

}  // namespace

MemberSessionOptions JobOptions::SessionOptions() const {
  MemberSessionOptions o;
  o.scheduler_address = scheduler_address;
  o.role = v1::WORKER;
  o.requested_rank = requested_rank;
  o.connect_timeout = connect_timeout;
  o.scheduler_grace = scheduler_grace;
  o.security = security;
  return o;
}

DistKVStoreOptions JobOptions::KVStoreOptions() const {
  DistKVStoreOptions o;
  o.part_bytes = part_bytes;
  o.fusion_bytes = fusion_bytes;
  o.compression = compression;
  return o;
}

absl::StatusOr<JobOptions> JobOptionsFromEnvironment(
    const std::string& scheduler, std::shared_ptr<const TransportSecurity> security) {
  JobOptions o;
  o.scheduler_address = scheduler;
  if (o.scheduler_address.empty()) {
    const char* from_env = std::getenv("COHORT_SCHEDULER");
    if (from_env == nullptr || *from_env == '\0') {
      return absl::InvalidArgumentError(
          "COHORT_SCHEDULER is not set: start this program with the launcher "
          "(bazel run //tools:launch -- -n W -s S -- PROGRAM) or pass the scheduler's address");
    }
    o.scheduler_address = from_env;
  }
  if (const char* rank = std::getenv("COHORT_RANK"); rank != nullptr && *rank != '\0') {
    if (!absl::SimpleAtoi(rank, &o.requested_rank)) {
      return absl::InvalidArgumentError(absl::StrCat("COHORT_RANK='", rank, "' is not a number"));
    }
  }
  RETURN_IF_ERROR(ReadInt64Variable("COHORT_PART_BYTES", &o.part_bytes));
  RETURN_IF_ERROR(ReadInt64Variable("COHORT_FUSION_BYTES", &o.fusion_bytes));
  int64_t wait_us = -1;
  RETURN_IF_ERROR(ReadInt64Variable("COHORT_FUSION_WAIT_US", &wait_us));
  if (wait_us >= 0) o.fusion_wait = absl::Microseconds(wait_us);
  if (const char* c = std::getenv("COHORT_GRADIENT_COMPRESSION"); c != nullptr && *c != '\0') {
    absl::StatusOr<GradientCompression> parsed = ParseGradientCompression(c);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("COHORT_GRADIENT_COMPRESSION: ", parsed.status().message()));
    }
    o.compression = *parsed;
  }
  int64_t shared_memory = o.shared_memory ? 1 : 0;
  RETURN_IF_ERROR(ReadInt64Variable("COHORT_SHARED_MEMORY", &shared_memory));
  if (shared_memory != 0 && shared_memory != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "COHORT_SHARED_MEMORY=", shared_memory, ": expected 1 (shared memory with shards on this "
        "host, the default) or 0 (gRPC only)"));
  }
  o.shared_memory = shared_memory == 1;
  if (const char* bind = std::getenv("COHORT_METRICS_BIND"); bind != nullptr && *bind != '\0') {
    o.metrics_bind = bind;
  }
  int64_t metrics_port = 0;
  RETURN_IF_ERROR(ReadInt64Variable("COHORT_METRICS_PORT", &metrics_port));
  if (metrics_port < 0 || metrics_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "COHORT_METRICS_PORT=", metrics_port, ": a port, 0-65535 (0: one the system picks)"));
  }
  o.metrics_port = static_cast<int>(metrics_port);
  if (const char* path = std::getenv("COHORT_METRICS_PORT_FILE"); path != nullptr) {
    o.metrics_port_file = path;
  }
  if (security != nullptr) {
    o.security = std::move(security);
    return o;
  }
  SecurityOptions from_env;
  from_env.cert_name = "worker";
  if (const char* dir = std::getenv("COHORT_TLS_DIR"); dir != nullptr) from_env.tls_dir = dir;
  if (const char* token = std::getenv("COHORT_TOKEN_FILE"); token != nullptr) {
    from_env.token_file = token;
  }
  const char* insecure = std::getenv("COHORT_INSECURE");
  from_env.insecure = insecure != nullptr && std::string(insecure) == "1";
  if (from_env.insecure == !from_env.tls_dir.empty()) {
    return absl::InvalidArgumentError(
        from_env.insecure ? "COHORT_INSECURE=1 and COHORT_TLS_DIR are both set: choose one"
                          : "neither COHORT_TLS_DIR nor COHORT_INSECURE=1 is set: say how the "
                            "job's services are reached (the launcher sets one; by hand, "
                            "--tls_dir or --insecure)");
  }
  ASSIGN_OR_RETURN(o.security, TransportSecurity::Load(from_env));
  return o;
}

absl::StatusOr<std::unique_ptr<KVStore>> CreateDistKVStore(absl::string_view type,
                                                           MemberSession* session,
                                                           const JobOptions& options,
                                                           const TransportWrapper& wrap_transport) {
  ASSIGN_OR_RETURN(const KVStoreMode mode, DistMode(type, *session));
  RETURN_IF_ERROR(ValidateDataPath(options));
  ASSIGN_OR_RETURN(ShardConnection c, ConnectToShards(session, options, wrap_transport));
  return std::unique_ptr<KVStore>(std::make_unique<DistKVStore>(
      mode, session, std::move(c.transport), std::move(c.shards), options.KVStoreOptions()));
}

namespace kvstore {

absl::StatusOr<std::unique_ptr<KVStore>> Create(absl::string_view type, const JobOptions& options) {
  if (type == "local") return CreateKVStore(type);
  RETURN_IF_ERROR(ValidateDataPath(options));
  ASSIGN_OR_RETURN(std::unique_ptr<MemberSession> session,
                   MemberSession::Join(options.SessionOptions()));
  ASSIGN_OR_RETURN(const KVStoreMode mode, DistMode(type, *session));
  ASSIGN_OR_RETURN(ShardConnection c, ConnectToShards(session.get(), options, nullptr));
  return std::unique_ptr<KVStore>(std::make_unique<SessionOwningKVStore>(
      std::move(session), mode, std::move(c), options.KVStoreOptions()));
}

}  // namespace kvstore
}  // namespace cohort
