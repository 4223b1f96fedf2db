#include "services/membership/member_session.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/common/grpc_util.h"

namespace cohort {
namespace {

const char* RoleWord(v1::Role role) { return role == v1::SHARD ? "shard" : "worker"; }

}  // namespace

absl::StatusOr<std::unique_ptr<MemberSession>> MemberSession::Join(
    const MemberSessionOptions& options) {
  auto stub = v1::Scheduler::NewStub(MakeChannel(options.scheduler_address));
  v1::RegisterRequest request;
  request.set_role(options.role);
  request.set_requested_rank(options.requested_rank);
  request.set_host(HostName());
  request.set_pid(getpid());
  request.set_port(options.port);
  request.set_advertise_host(options.advertise_host);
  grpc::ClientContext context;
  context.set_wait_for_ready(true);  // the scheduler may start after us
  context.set_deadline(absl::ToChronoTime(absl::Now() + options.connect_timeout));
  v1::RegisterReply reply;
  const grpc::Status status = stub->Register(&context, request, &reply);
  if (!status.ok()) {
    return absl::Status(
        FromGrpcStatus(status).code(),
        absl::StrCat("cannot join the job at scheduler ", options.scheduler_address, " as a ",
                     RoleWord(options.role), ": ", status.error_message(),
                     status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                         ? " (is the scheduler running there? check --scheduler)"
                         : ""));
  }
  return std::unique_ptr<MemberSession>(new MemberSession(options, std::move(stub), reply));
}

MemberSession::MemberSession(MemberSessionOptions options,
                             std::unique_ptr<v1::Scheduler::Stub> stub, v1::RegisterReply reply)
    : options_(std::move(options)),
      stub_(std::move(stub)),
      reply_(std::move(reply)),
      rank_(reply_.rank()) {
  {
    absl::MutexLock lock(&mu_);
    last_answer_ = absl::Now();
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

MemberSession::~MemberSession() {
  bool left;
  {
    absl::MutexLock lock(&mu_);
    left = leaving_;
  }
  if (!left) Leave(absl::InternalError(absl::StrCat(name(), " exited without reporting why")));
}

std::string MemberSession::name() const { return absl::StrCat(RoleWord(options_.role), " ", rank_); }

absl::StatusOr<std::vector<std::string>> MemberSession::WaitForCluster() {
  v1::ClusterSpecRequest request;
  request.set_role(options_.role);
  request.set_rank(rank_);
  grpc::ClientContext context;
  v1::ClusterSpec spec;
  const grpc::Status status = stub_->GetClusterSpec(&context, request, &spec);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<std::string>(spec.shard_addresses().begin(), spec.shard_addresses().end());
}

absl::StatusOr<uint64_t> MemberSession::Barrier(const std::string& name, uint64_t fingerprint) {
  v1::BarrierRequest request;
  request.set_rank(rank_);
  request.set_name(name);
  request.set_partition_fingerprint(fingerprint);
  grpc::ClientContext context;
  v1::BarrierReply reply;
  const grpc::Status status = stub_->Barrier(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status);
  return reply.partition_fingerprint();
}

void MemberSession::Leave(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (leaving_) return;
  }
  v1::StopRequest request;
  request.set_role(options_.role);
  request.set_rank(rank_);
  if (!status.ok()) request.set_error(std::string(status.message()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::StopReply reply;
  stub_->Stop(&context, request, &reply);  // a lost scheduler already ended the job
  {
    absl::MutexLock lock(&mu_);
    leaving_ = true;
  }
  heartbeat_.join();
}

int MemberSession::OnEnd(std::function<void()> f) {
  absl::MutexLock listeners(&listeners_mu_);
  const int id = next_listener_++;
  if (ended()) {
    f();
  } else {
    listeners_.emplace_back(id, std::move(f));
  }
  return id;
}

void MemberSession::RemoveEndListener(int id) {
  absl::MutexLock listeners(&listeners_mu_);
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
    if (it->first == id) {
      listeners_.erase(it);
      return;
    }
  }
}

absl::Status MemberSession::end_status() const {
  absl::MutexLock lock(&mu_);
  return end_status_;
}

bool MemberSession::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

bool MemberSession::WaitUntilEnded(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
}

void MemberSession::End(v1::JobState state, const std::string& reason) {
  absl::MutexLock listeners(&listeners_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    if (state == v1::FAILED) {
      end_status_ = absl::AbortedError(absl::StrCat("the job failed: ", reason));
    } else if (state != v1::DONE) {
      end_status_ = absl::UnavailableError(reason);
    }
  }
  for (auto& [id, f] : listeners_) f();
  listeners_.clear();
}

std::string MemberSession::RunControlStream() {
  grpc::ClientContext context;
  auto stream = stub_->Control(&context);
  absl::Notification reader_done;
  std::thread reader([&] {
    v1::ControlMessage message;
    while (stream->Read(&message)) {
      {
        absl::MutexLock lock(&mu_);
        last_answer_ = absl::Now();
      }
      if (message.state() == v1::DONE || message.state() == v1::FAILED) {
        End(message.state(), message.reason());
      }
    }
    reader_done.Notify();
  });
  v1::Heartbeat heartbeat;
  heartbeat.set_role(options_.role);
  heartbeat.set_rank(rank_);
  std::string broke;
  while (true) {
    absl::MutexLock lock(&mu_);
    const auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return leaving_ || ended_; };
    if (stop()) break;
    const absl::Duration silent = absl::Now() - last_answer_;
    if (silent > options_.scheduler_grace) {
      broke = absl::StrCat("no answer for ", absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(100))));
      break;
    }
    if (progress_.has_value()) *heartbeat.mutable_progress() = *progress_;
    mu_.Unlock();
    const bool written = reader_done.HasBeenNotified() ? false : stream->Write(heartbeat);
    mu_.Lock();
    if (!written) {
      broke = "the control stream broke";
      break;
    }
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](MemberSession* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                               return s->leaving_ || s->ended_;
                             },
                             this),
                         options_.heartbeat_interval);
  }
  if (broke.empty()) {
    stream->WritesDone();
    // The scheduler closes its side when it sees ours closed; don't wait on a hung one.
    if (!reader_done.WaitForNotificationWithTimeout(absl::Seconds(2))) context.TryCancel();
  } else {
    context.TryCancel();
  }
  reader.join();
  const grpc::Status status = stream->Finish();
  if (!broke.empty() && !status.ok()) absl::StrAppend(&broke, " (", status.error_message(), ")");
  return broke;
}

void MemberSession::SetProgress(const v1::Progress& progress) {
  absl::MutexLock lock(&mu_);
  progress_ = progress;
}

void MemberSession::HeartbeatLoop() {
  while (true) {
    const std::string broke = RunControlStream();
    absl::MutexLock lock(&mu_);
    if (leaving_ || ended_) return;
    // The stream broke: reconnect until the grace period since the last answer runs out.
    const absl::Duration silent = absl::Now() - last_answer_;
    if (silent > options_.scheduler_grace) {
      mu_.Unlock();
      End(v1::JOB_STATE_UNSPECIFIED,
          absl::StrCat(name(), " lost the scheduler at ", options_.scheduler_address, ": ", broke,
                       "; no reconnect within ", absl::FormatDuration(options_.scheduler_grace),
                       " (--scheduler_grace)"));
      mu_.Lock();
      return;
    }
    mu_.AwaitWithTimeout(absl::Condition(&leaving_), options_.heartbeat_interval);
    if (leaving_) return;
  }
}

}  // namespace cohort
