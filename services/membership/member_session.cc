#include "services/membership/member_session.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/common/addresses.h"
#include "services/common/grpc_util.h"
#include "services/common/log_safe.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

const char* RoleWord(v1::Role role) { return role == v1::SHARD ? "shard" : "worker"; }

// The Control call as a ControlStream.
class GrpcControlStream final : public ControlStream {
 public:
  explicit GrpcControlStream(v1::Scheduler::Stub* stub) : stream_(stub->Control(&context_)) {}

  bool Read(v1::ControlMessage* message) override { return stream_->Read(message); }
  bool Write(const v1::Heartbeat& heartbeat) override { return stream_->Write(heartbeat); }
  void WritesDone() override { stream_->WritesDone(); }
  void Cancel() override { context_.TryCancel(); }
  absl::Status Finish() override { return FromGrpcStatus(stream_->Finish()); }

 private:
  grpc::ClientContext context_;
  const std::unique_ptr<grpc::ClientReaderWriter<v1::Heartbeat, v1::ControlMessage>> stream_;
};

// The scheduler's heartbeat interval where it gives one (a large job's is longer).
MembershipTiming Timing(const MemberSessionOptions& options, const v1::RegisterReply& reply) {
  MembershipTiming t;
  t.heartbeat_interval = reply.heartbeat_interval_ms() > 0
                             ? absl::Milliseconds(reply.heartbeat_interval_ms())
                             : options.heartbeat_interval;
  // A large job's members beat rarely (the scheduler's answers come as rarely): they give the
  // scheduler up only after two intervals without one.
  t.scheduler_grace = std::max(options.scheduler_grace, 2 * t.heartbeat_interval);
  return t;
}

// Whether a call failed in the TLS handshake on something waiting does not mend (the server's
// certificate is not from our CA, or it speaks no TLS), as OpenSSL words it through gRPC; not
// a connection closed mid-handshake, which a proxy in front of a scheduler still starting does.
bool IsHandshakeFailure(const grpc::Status& status) {
  const std::string message = absl::AsciiStrToLower(status.error_message());
  return absl::StrContains(message, "certificate verify failed") ||
         absl::StrContains(message, "wrong version number");
}

// Whether the connection was closed as soon as it was made: what a TLS server does to a
// plaintext client. Said only after kClosedAtOnceFor of it, as a proxy in front of a scheduler
// still starting may do it for a moment.
bool IsClosedAtOnce(const grpc::Status& status) {
  const std::string message = absl::AsciiStrToLower(status.error_message());
  return absl::StrContains(message, "socket closed") ||
         absl::StrContains(message, "connection reset");
}
constexpr absl::Duration kClosedAtOnceFor = absl::Seconds(5);

// Which workers share a host, as a meeting at an abstract Unix socket needs it: the same
// kernel (its boot id), network namespace (the socket's), user namespace and Unix user (the
// peer the leader admits). Empty where /proc does not say.
std::string HostKeyOfThisProcess() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string key;
  std::getline(boot, key);
  for (const char* ns : {"/proc/self/ns/net", "/proc/self/ns/user"}) {
    char link[128];
    const ssize_t n = readlink(ns, link, sizeof(link));
    if (key.empty() || n <= 0) return "";
    absl::StrAppend(&key, " ", absl::string_view(link, n));
  }
  return absl::StrCat(key, " uid ", getuid());
}

// A host's meeting the scheduler refused: its workers ask the scheduler anew.
constexpr absl::string_view kMeetAgainPayload = "cohort/meet-again";
absl::Status MeetAgainError() {
  absl::Status s = absl::UnavailableError(
      "the scheduler counts this host's workers differently than it did: asking it again");
  s.SetPayload(kMeetAgainPayload, absl::Cord("1"));
  return s;
}
bool IsMeetAgain(const absl::Status& status) {
  return status.GetPayload(kMeetAgainPayload).has_value();
}

// What a barrier the job's end interrupts answers: why it ended (Aborted when DONE).
absl::Status EndedError(const absl::Status& end) {
  return end.ok() ? absl::AbortedError("the job ended") : end;
}

v1::RegisterRequest RegisterRequestOf(const MemberSessionOptions& options, int rank) {
  v1::RegisterRequest request;
  request.set_role(options.role);
  request.set_requested_rank(rank);
  request.set_host(HostName());
  request.set_pid(getpid());
  request.set_port(options.port);
  request.set_advertise_address(options.advertise_address);
  request.set_threads(options.threads);
  request.set_cores(options.cores);
  request.set_host_key(options.host_key);
  return request;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MemberSession>> MemberSession::Join(
    const MemberSessionOptions& given) {
  MemberSessionOptions options = given;
  if (options.role == v1::WORKER) {
    if (options.host_key.empty()) options.host_key = HostKeyOfThisProcess();
    if (options.host_meetings == nullptr) {
      ASSIGN_OR_RETURN(options.host_meetings, HostMeetings::Create());
    }
  }
  auto stub = v1::Scheduler::NewStub(MakeChannel(options.scheduler_address, *options.security));
  const v1::RegisterRequest request = RegisterRequestOf(options, options.requested_rank);
  // The scheduler may start after us: asked again until connect_timeout while nothing answers
  // there, but not after a failed TLS handshake, which waiting does not mend.
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  v1::RegisterReply reply;
  grpc::Status status;
  std::optional<absl::Time> closed_since;  // every connection closed at once since then
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    status = stub->Register(&context, request, &reply);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || absl::Now() >= deadline) break;
    closed_since = IsClosedAtOnce(status) ? closed_since.value_or(absl::Now())
                                          : std::optional<absl::Time>();
    if (options.security->plaintext() && closed_since.has_value() &&
        absl::Now() - *closed_since >= kClosedAtOnceFor) {
      return absl::UnauthenticatedError(absl::StrCat(
          "cannot join the job at scheduler ", options.scheduler_address, " as a ",
          RoleWord(options.role), ": it closes every plaintext connection at once (",
          LogSafe(status.error_message()), "); a scheduler with TLS does: give --tls_dir and "
          "--token_file of this job instead of --insecure"));
    }
    if (IsHandshakeFailure(status)) {
      return absl::UnauthenticatedError(absl::StrCat(
          "cannot join the job at scheduler ", options.scheduler_address, " as a ",
          RoleWord(options.role), ": the TLS handshake failed (", LogSafe(status.error_message()),
          "); is --tls_dir this job's? Its ca.pem must be the CA that issued the scheduler's "
          "certificate, and the scheduler must run with TLS"));
    }
    absl::SleepFor(std::min(absl::Milliseconds(200), deadline - absl::Now()));
  }
  if (!status.ok()) {
    const bool silent = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                        status.error_code() == grpc::StatusCode::UNAVAILABLE;
    std::string why = LogSafe(status.error_message());
    if (silent) {
      absl::StrAppend(&why, " (is the scheduler running there? check --scheduler)");
    } else if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      why = "what answers there is not a Cohort scheduler (a shard's or a worker's port?): "
            "--scheduler takes the address of the scheduler's 'listening on' line";
    }
    return absl::Status(
        silent ? absl::StatusCode::kDeadlineExceeded : FromGrpcStatus(status).code(),
        absl::StrCat("cannot join the job at scheduler ", options.scheduler_address, " as a ",
                     RoleWord(options.role), ": ", why));
  }
  return std::unique_ptr<MemberSession>(new MemberSession(options, std::move(stub), reply));
}

MemberSession::MemberSession(MemberSessionOptions options,
                             std::unique_ptr<v1::Scheduler::Stub> stub, v1::RegisterReply reply)
    : options_(std::move(options)),
      stub_(std::move(stub)),
      reply_(std::move(reply)),
      rank_(reply_.rank()),
      meetings_(options_.host_meetings),
      core_(name(), options_.role, rank_, options_.scheduler_address, Timing(options_, reply_),
            [this] { return std::make_unique<GrpcControlStream>(stub_.get()); }, &clock_,
            [this] { return Rejoin(); }) {
  if (meetings_ != nullptr) {
    core_.OnGenerationChange([this](int64_t generation) {
      CloseHostGroup(generation, MembershipChangedError(generation, "the job's workers changed"));
    });
    core_.OnEnd([this] {
      CloseHostGroup(std::numeric_limits<int64_t>::max(), EndedError(core_.end_status()));
    });
  }
  core_.Start();
}

std::string MemberSession::PlaceOf(const HostGroup& group) const {
  return absl::StrCat("cohort/", job_id(), "/barrier/", group.generation, "/", group.leader);
}

void MemberSession::CloseHostGroup(int64_t past_generation, const absl::Status& why) {
  HostGroup group;
  {
    absl::MutexLock lock(&mu_);
    group = group_;
  }
  if (group.generation < 0 || group.generation >= past_generation || group.workers < 2) return;
  meetings_->Close(PlaceOf(group), why);
}

absl::Status MemberSession::Rejoin() {
  v1::RegisterRequest request = RegisterRequestOf(options_, rank_);
  request.set_rejoin(true);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.heartbeat_interval * 4));
  v1::RegisterReply reply;
  const grpc::Status status = stub_->Register(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status);
  if (reply.job_id() != reply_.job_id()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the scheduler at ", options_.scheduler_address, " runs job ", reply.job_id(), ", not ",
        reply_.job_id()));
  }
  return absl::OkStatus();
}

MemberSession::~MemberSession() {
  Leave(absl::InternalError(absl::StrCat(name(), " exited without reporting why")));
}

std::string MemberSession::name() const {
  return absl::StrCat(RoleWord(options_.role), " ", rank_);
}

absl::StatusOr<ShardsView> MemberSession::WaitForShards(absl::Duration timeout) {
  v1::ClusterSpecRequest request;
  request.set_role(options_.role);
  request.set_rank(rank_);
  grpc::ClientContext context;
  if (timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  v1::ClusterSpec spec;
  const grpc::Status status = stub_->GetClusterSpec(&context, request, &spec);
  if (!status.ok()) return FromGrpcStatus(status);
  ShardsView view;
  view.addresses.assign(spec.shard_addresses().begin(), spec.shard_addresses().end());
  view.incarnations.assign(spec.shard_incarnations().begin(), spec.shard_incarnations().end());
  view.restart_grace = absl::Seconds(spec.shard_restart_grace_seconds());
  view.replicas = std::max(1, spec.shard_replicas());
  view.share_leaders.assign(spec.share_leaders().begin(), spec.share_leaders().end());
  view.share_backups.assign(spec.share_backups().begin(), spec.share_backups().end());
  view.share_backup_addresses.assign(spec.share_backup_addresses().begin(),
                                     spec.share_backup_addresses().end());
  view.generation = spec.generation();
  view.rank = spec.worker_rank();
  view.num_workers = spec.num_workers();
  view.worker_hosts.assign(spec.worker_hosts().begin(), spec.worker_hosts().end());
  if (spec.host_workers() > 0) {
    SetHostGroup({spec.generation(), spec.host_leader(), spec.host_workers()});
  }
  return view;
}

absl::StatusOr<uint64_t> MemberSession::Barrier(const std::string& name, uint64_t fingerprint,
                                                int64_t generation) {
  absl::Notification released;
  absl::StatusOr<uint64_t> result;
  BarrierAsync(name, fingerprint, generation, [&](absl::StatusOr<uint64_t> r) {
    result = std::move(r);
    released.Notify();
  });
  released.WaitForNotification();
  return result;
}

absl::StatusOr<std::vector<std::string>> MemberSession::Exchange(const std::string& name,
                                                                 std::string payload,
                                                                 int64_t generation) {
  absl::Notification released;
  absl::StatusOr<std::vector<std::string>> result;
  CallBarrier(name, 0, generation, std::move(payload), [&](absl::StatusOr<v1::BarrierReply> r) {
    result = r.ok() ? absl::StatusOr<std::vector<std::string>>(std::vector<std::string>(
                          r->payloads().begin(), r->payloads().end()))
                    : r.status();
    released.Notify();
  });
  released.WaitForNotification();
  return result;
}

void MemberSession::BarrierAsync(const std::string& name, uint64_t fingerprint,
                                 int64_t generation, BarrierDone done) {
  HostGroup group;
  {
    absl::MutexLock lock(&mu_);
    group = group_;
  }
  if (meetings_ == nullptr || group.generation != generation || group.workers < 2) {
    // Alone, or not told whom this worker shares its host with: the scheduler counts the call
    // or sends it to meet them.
    return CallBarrier(name, fingerprint, generation, std::nullopt,
                       [this, name, fingerprint, generation, done = std::move(done)](
                           absl::StatusOr<v1::BarrierReply> reply) mutable {
                         if (!reply.ok()) return done(reply.status());
                         if (reply->meet_on_host() && meetings_ != nullptr) {
                           SetHostGroup({generation, reply->host_leader(), reply->host_workers()});
                           return BarrierAsync(name, fingerprint, generation, std::move(done));
                         }
                         done(reply->partition_fingerprint());
                       });
  }
  // The scheduler refused the leader's call for the host (the host's workers changed as a
  // restarted scheduler took the job over): each worker asks it anew.
  HostMeetings::Done met = [this, name, fingerprint, generation,
                            done = std::move(done)](absl::StatusOr<uint64_t> result) mutable {
    if (IsMeetAgain(result.status())) {
      SetHostGroup({-1, 0, 1});
      return BarrierAsync(name, fingerprint, generation, std::move(done));
    }
    done(std::move(result));
  };
  const std::string place = PlaceOf(group);
  if (group.leader == rank_) {
    meetings_->Lead(
        place, group.workers - 1, std::move(met),
        [this, name, fingerprint, generation](std::vector<HostMeetings::Arrival> others,
                                              HostMeetings::Done release) {
          CallBarrier(
              name, fingerprint, generation, std::nullopt,
              [release = std::move(release)](absl::StatusOr<v1::BarrierReply> reply) {
                if (!reply.ok()) return release(reply.status());
                if (reply->meet_on_host()) return release(MeetAgainError());
                release(reply->partition_fingerprint());
              },
              others);
        });
  } else {
    meetings_->Join(place, {rank_, name, fingerprint}, std::move(met));
  }
  // News that came before the meeting opened closes it as news after does.
  if (const int64_t now = core_.generation(); now > generation) {
    CloseHostGroup(now, MembershipChangedError(now, "the job's workers changed"));
  }
  if (core_.ended()) {
    CloseHostGroup(std::numeric_limits<int64_t>::max(), EndedError(core_.end_status()));
  }
}

void MemberSession::SetHostGroup(const HostGroup& group) {
  absl::MutexLock lock(&mu_);
  if (group.generation < 0 || group.generation >= group_.generation) group_ = group;
}

void MemberSession::CallBarrier(const std::string& name, uint64_t fingerprint,
                                int64_t generation, std::optional<std::string> payload,
                                std::function<void(absl::StatusOr<v1::BarrierReply>)> done,
                                const std::vector<HostMeetings::Arrival>& host_arrivals) {
  struct Call {  // what gRPC reads and writes until the call is done
    grpc::ClientContext context;
    v1::BarrierRequest request;
    v1::BarrierReply reply;
  };
  auto call = std::make_shared<Call>();
  call->request.set_rank(rank_);
  call->request.set_name(name);
  call->request.set_partition_fingerprint(fingerprint);
  call->request.set_generation(generation);
  call->request.set_exchange(payload.has_value());
  if (payload.has_value()) call->request.set_payload(*std::move(payload));
  for (const HostMeetings::Arrival& a : host_arrivals) {
    v1::BarrierArrival* arrival = call->request.add_host_arrivals();
    arrival->set_rank(a.rank);
    arrival->set_name(a.name);
    arrival->set_partition_fingerprint(a.fingerprint);
  }
  stub_->async()->Barrier(
      &call->context, &call->request, &call->reply,
      [call, done = std::move(done)](const grpc::Status& status) {
        if (!status.ok()) return done(FromGrpcStatus(status));
        if (call->reply.membership_changed_to() != 0) {
          return done(MembershipChangedError(call->reply.membership_changed_to(),
                                             call->reply.membership_change()));
        }
        done(std::move(call->reply));
      });
}

void MemberSession::Vanish() {
  {
    absl::MutexLock lock(&mu_);
    if (left_) return;
    left_ = true;
  }
  core_.Stop();
}

void MemberSession::Leave(const absl::Status& status, absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (left_) return;
    left_ = true;
  }
  v1::StopRequest request;
  request.set_role(options_.role);
  request.set_rank(rank_);
  if (!status.ok()) request.set_error(std::string(status.message()));
  if (const std::optional<int> shard = LostShard(status)) request.set_lost_shard(*shard);
  // A scheduler being restarted (launch --restart_scheduler), or killed while it answered,
  // hears it once it listens again; one given up on already ended the job.
  const absl::Time deadline = absl::Now() + timeout;
  for (bool retry = !core_.ended();;) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    context.set_wait_for_ready(retry);
    v1::StopReply reply;
    const grpc::Status said = stub_->Stop(&context, request, &reply);
    if (!retry || said.error_code() != grpc::StatusCode::UNAVAILABLE || absl::Now() >= deadline) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  core_.Stop();
}

}  // namespace cohort
