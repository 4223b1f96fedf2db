#include "services/scheduler/scheduler_service.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "services/common/addresses.h"
#include "services/common/log_safe.h"
#include "services/common/grpc_util.h"
#include "services/membership/job_membership.h"
#include "services/scheduler/job_status.h"

namespace cohort {
namespace {

absl::StatusOr<MemberRole> RoleFromProto(v1::Role role) {
  if (role == v1::SHARD) return MemberRole::kShard;
  if (role == v1::WORKER) return MemberRole::kWorker;
  return absl::InvalidArgumentError("a member must say whether it is a shard or a worker");
}

v1::JobState ToProto(JobState state) {
  switch (state) {
    case JobState::kForming:
      return v1::FORMING;
    case JobState::kRunning:
      return v1::RUNNING;
    case JobState::kDone:
      return v1::DONE;
    case JobState::kFailed:
      return v1::FAILED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

}  // namespace

grpc::Status SchedulerService::Register(grpc::ServerContext* context,
                                        const v1::RegisterRequest* request,
                                        v1::RegisterReply* reply) {
  absl::StatusOr<MemberRole> role = RoleFromProto(request->role());
  if (!role.ok()) return ToGrpcStatus(role.status());
  MemberRegistration r;
  r.role = *role;
  r.requested_rank = request->requested_rank();
  // Peers' own words are escaped once, here: the core logs them and puts them in /status.
  r.host = LogSafe(request->host(), 128);
  r.host_key = request->host_key().substr(0, 256);
  r.pid = request->pid();
  r.threads = request->threads();
  r.cores = request->cores();
  r.rejoin = request->rejoin();
  if (r.role == MemberRole::kShard) {
    // Workers dial the shard where the scheduler saw it come from, unless it says otherwise.
    const std::string& advertised = request->advertise_address();
    if (absl::Status s = CheckDialAddress(advertised); !advertised.empty() && !s.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("shard registration with --advertise_address ",
                                       s.message()));
    }
    if (!advertised.empty() && HostOfAddress(advertised) != advertised) {
      r.address = advertised;  // host:port
    } else {
      const std::string host = advertised.empty() ? PeerHost(context->peer()) : advertised;
      if (host.empty() || request->port() <= 0) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("shard registration without a reachable address (peer ",
                                         context->peer(), ", port ", request->port(),
                                         "); pass --advertise_address"));
      }
      r.address = absl::StrCat(host, ":", request->port());
    }
  }
  absl::StatusOr<int> rank = core_->Register(r);
  for (const std::string& notice : core_->TakeNotices()) {
    // One write: notices come from more than one thread.
    std::cerr << absl::StrCat("scheduler: warning: ", notice, "\n");
  }
  if (!rank.ok()) {
    std::cerr << absl::StrCat("scheduler: refused the registration of a ",
                              RoleName(r.role),
                              r.requested_rank >= 0 ? absl::StrCat(" as rank ", r.requested_rank)
                                                    : std::string(),
                              " from ", LogSafe(context->peer(), 128), " (host ", r.host, ", pid ",
                              r.pid, "): ", rank.status().message(), "\n");
    return ToGrpcStatus(rank.status());
  }
  const JobSpec& spec = core_->spec();
  reply->set_job_id(spec.job_id);
  reply->set_rank(*rank);
  reply->set_num_workers(spec.num_workers);
  reply->set_num_shards(spec.num_shards);
  reply->set_mode(std::string(KVStoreModeName(spec.mode)));
  reply->set_joins_as_backup(r.role == MemberRole::kShard && core_->JoinedAsBackup(*rank));
  reply->set_shard_replicas(core_->spec().shard_replicas);
  // Said only where it differs from the members' default, so that one may beat faster.
  if (spec.heartbeat_interval != JobSpec().heartbeat_interval) {
    reply->set_heartbeat_interval_ms(
        static_cast<int32_t>(absl::ToInt64Milliseconds(spec.heartbeat_interval)));
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* SchedulerService::GetClusterSpec(grpc::CallbackServerContext* context,
                                                           const v1::ClusterSpecRequest* request,
                                                           v1::ClusterSpec* spec) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The request and the reply stay ours until Finish.
  core_->WaitForClusterAsync([this, reactor, request,
                              spec](const absl::StatusOr<ClusterView>& view) {
    if (!view.ok()) return reactor->Finish(ToGrpcStatus(view.status()));
    const JobSpec& job = core_->spec();
    spec->set_job_id(job.job_id);
    spec->set_num_workers(static_cast<int>(view->workers.size()));
    spec->set_generation(view->generation);
    const auto place = std::find(view->workers.begin(), view->workers.end(), request->rank());
    spec->set_worker_rank(request->role() == v1::WORKER && place != view->workers.end()
                              ? static_cast<int>(place - view->workers.begin())
                              : -1);
    spec->set_num_shards(job.num_shards);
    spec->set_mode(std::string(KVStoreModeName(job.mode)));
    for (const std::string& a : view->shard_addresses) spec->add_shard_addresses(a);
    for (const std::string& i : view->shard_incarnations) spec->add_shard_incarnations(i);
    spec->set_shard_restart_grace_seconds(absl::ToDoubleSeconds(view->shard_restart_grace));
    spec->set_shard_replicas(job.shard_replicas);
    for (int leader : view->share_leaders) spec->add_share_leaders(leader);
    for (int backup : view->share_backups) spec->add_share_backups(backup);
    for (const std::string& a : view->share_backup_addresses) spec->add_share_backup_addresses(a);
    for (const std::string& h : view->worker_hosts) spec->add_worker_hosts(h);
    if (auto group = view->host_groups->find(request->rank());
        request->role() == v1::WORKER && group != view->host_groups->end()) {
      spec->set_host_leader(group->second.leader);
      spec->set_host_workers(group->second.workers);
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

// A member's control stream. A read is always outstanding: each heartbeat is answered with the
// job's state; a new generation or the job's end is written at once (ControlStreams::Changed),
// without waiting for the member's next heartbeat. One write at a time, as the callback API
// needs: a message that comes while one is being written waits, the latest replacing an older
// (each says the whole state; members take generations and ends only forward). The stream's
// end is the member's leaving or death, told to the core.
class ControlReactor final : public grpc::ServerBidiReactor<v1::Heartbeat, v1::ControlMessage> {
 public:
  ControlReactor(SchedulerCore* core, ControlStreams* streams,
                 grpc::CallbackServerContext* context)
      : core_(core), streams_(streams), context_(context) {
    streams_->Add(this);
    StartRead(&heartbeat_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return End(grpc::Status::OK);
    absl::StatusOr<MemberRole> role = RoleFromProto(heartbeat_.role());
    if (!role.ok()) return End(ToGrpcStatus(role.status()));
    role_ = *role;
    rank_ = heartbeat_.rank();
    pid_ = heartbeat_.pid();
    known_ = true;
    JobState state;
    if (heartbeat_.has_progress()) {
      const v1::Progress& p = heartbeat_.progress();
      const WorkerProgress progress{
          p.step(),         p.epoch(),
          p.images_per_second(), p.step_seconds(),
          p.communication_overhead(), p.loss(),
          p.total_steps(),  p.has_test_top1() ? std::optional<double>(p.test_top1()) : std::nullopt};
      state = core_->Heartbeat(role_, rank_, &progress, pid_);
    } else {
      state = core_->Heartbeat(role_, rank_, nullptr, pid_);
    }
    if (heartbeat_.holds_copies_of_size() > 0) {
      core_->CopiesHeld(rank_, pid_, heartbeat_.holds_copies_of());
    }
    const bool ended = state == JobState::kDone || state == JobState::kFailed;
    Send(state, core_->generation(), ended ? core_->reason() : std::string());
    StartRead(&heartbeat_);
  }

  // The job's state to write (a heartbeat's answer, or a change the core told).
  void Send(JobState state, int64_t generation, const std::string& reason) {
    v1::ControlMessage message;
    message.set_state(ToProto(state));
    message.set_generation(generation);
    if (state == JobState::kDone || state == JobState::kFailed) message.set_reason(reason);
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    if (writing_) {
      next_ = std::move(message);
      return;
    }
    writing_ = true;
    out_ = std::move(message);
    StartWrite(&out_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (ok && next_.has_value() && !finishing_) {
      out_ = *std::move(next_);
      next_.reset();
      StartWrite(&out_);
      return;
    }
    writing_ = false;
    if (finishing_) Finish(status_);
  }

  void OnDone() override {
    streams_->Remove(this);
    delete this;
  }

 private:
  // The read side ended (the member closed it or is gone) or broke the protocol: no more
  // writes; the stream finishes once the write in flight is done.
  void End(const grpc::Status& status) {
    streams_->Remove(this);
    if (known_ && status.ok()) {
      core_->ControlStreamEnded(
          role_, rank_, context_->IsCancelled() ? "connection lost" : "closed by the member",
          pid_);
    }
    absl::MutexLock lock(&mu_);
    finishing_ = true;
    status_ = status;
    if (!writing_) Finish(status_);
  }

  SchedulerCore* const core_;
  ControlStreams* const streams_;
  grpc::CallbackServerContext* const context_;
  // The read side's (one read at a time).
  v1::Heartbeat heartbeat_;
  bool known_ = false;
  MemberRole role_ = MemberRole::kWorker;
  int rank_ = -1;
  int64_t pid_ = 0;

  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  v1::ControlMessage out_ ABSL_GUARDED_BY(mu_);  // the write in flight
  std::optional<v1::ControlMessage> next_ ABSL_GUARDED_BY(mu_);
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

void ControlStreams::Add(ControlReactor* stream) {
  absl::MutexLock lock(&mu_);
  streams_.insert(stream);
}

void ControlStreams::Remove(ControlReactor* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

void ControlStreams::Changed(JobState state, int64_t generation, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  for (ControlReactor* stream : streams_) stream->Send(state, generation, reason);
}

SchedulerService::SchedulerService(SchedulerCore* core) : core_(core) {
  core_->SetChangeListener([this](JobState state, int64_t generation, const std::string& reason) {
    streams_.Changed(state, generation, reason);
  });
}

grpc::ServerBidiReactor<v1::Heartbeat, v1::ControlMessage>* SchedulerService::Control(
    grpc::CallbackServerContext* context) {
  return new ControlReactor(core_, &streams_, context);
}

grpc::ServerUnaryReactor* SchedulerService::Barrier(grpc::CallbackServerContext* context,
                                                    const v1::BarrierRequest* request,
                                                    v1::BarrierReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!request->exchange()) {
    if (const std::optional<HostGroup> group = core_->MeetOnHostFirst(
            request->rank(), request->generation(), request->host_arrivals_size())) {
      reply->set_meet_on_host(true);
      reply->set_host_leader(group->leader);
      reply->set_host_workers(group->workers);
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }
  }
  std::vector<SchedulerCore::Arrival> host_arrivals;
  host_arrivals.reserve(request->host_arrivals_size());
  for (const v1::BarrierArrival& a : request->host_arrivals()) {
    host_arrivals.push_back({a.rank(), LogSafe(a.name(), 128), a.partition_fingerprint()});
  }
  // The reply stays ours until Finish.
  core_->BarrierAsync(
      request->rank(), LogSafe(request->name(), 128), request->partition_fingerprint(),
      request->generation(), request->payload(),
      [reactor, reply, exchange = request->exchange()](
          const absl::StatusOr<SchedulerCore::BarrierPassed>& passed) {
        if (const std::optional<int64_t> changed = ChangedGeneration(passed.status())) {
          reply->set_membership_changed_to(*changed);
          reply->set_membership_change(std::string(passed.status().message()));
          return reactor->Finish(grpc::Status::OK);
        }
        if (!passed.ok()) return reactor->Finish(ToGrpcStatus(passed.status()));
        reply->set_partition_fingerprint(passed->fingerprint);
        // Only an exchange's: a plain barrier's reply to each of N workers would carry N empty
        // payloads.
        if (exchange) {
          for (const std::string& payload : *passed->payloads) reply->add_payloads(payload);
        }
        reactor->Finish(grpc::Status::OK);
      },
      host_arrivals);
  return reactor;
}

grpc::Status SchedulerService::Stop(grpc::ServerContext*, const v1::StopRequest* request,
                                    v1::StopReply*) {
  absl::StatusOr<MemberRole> role = RoleFromProto(request->role());
  if (!role.ok()) return ToGrpcStatus(role.status());
  core_->MemberStopped(*role, request->rank(), LogSafe(request->error(), 2048),
                       request->has_lost_shard() ? std::optional<int>(request->lost_shard())
                                                 : std::nullopt);
  return grpc::Status::OK;
}

}  // namespace cohort
