#ifndef COHORT_SERVICES_MEMBERSHIP_MEMBER_SESSION_H_
#define COHORT_SERVICES_MEMBERSHIP_MEMBER_SESSION_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/scheduler.grpc.pb.h"
#include "services/common/clock.h"
#include "services/common/transport_security.h"
#include "services/membership/host_meetings.h"
#include "services/membership/job_membership.h"
#include "services/membership/membership_core.h"

namespace cohort {

struct MemberSessionOptions {
  std::string scheduler_address;  // host:port
  v1::Role role = v1::WORKER;
  int requested_rank = -1;  // -1: the scheduler picks
  // Shards: the port their service listens on and, optionally, where workers should dial it
  // ("host" or "host:port").
  int port = 0;
  std::string advertise_address;
  // Workers: the compute threads they run and their host's cores (0: unknown), for the
  // scheduler's warning when the workers on one host take more threads than it has cores.
  int threads = 0;
  int cores = 0;
  absl::Duration connect_timeout = absl::Seconds(60);  // to reach the scheduler at first
  absl::Duration heartbeat_interval = absl::Milliseconds(250);  // unless the scheduler says
  // Without an answer from the scheduler for this long the member gives up (Contracts,
  // "Failure": it waits this grace period to reconnect, then exits).
  absl::Duration scheduler_grace = absl::Seconds(3);
  // How the scheduler is dialled (plaintext unless given).
  std::shared_ptr<const TransportSecurity> security = TransportSecurity::Plaintext();
  // Workers: where they meet the other workers of their host at a barrier before one arrives
  // for all (null: a meeting point of the session's own), and the key that says which workers
  // share a host (empty: this kernel's boot id, network and user namespaces, Unix user; a
  // simulation of many hosts in one process gives each its own).
  std::shared_ptr<HostMeetings> host_meetings;
  std::string host_key;
};

// A shard's or worker's membership in a job over gRPC: registers with the scheduler, keeps a
// heartbeat on the control stream (MembershipCore) and learns there when the job ends; the
// cluster spec, barriers and leaving are calls to the scheduler. Thread-safe.
//
// At a plain barrier the workers sharing a host (the scheduler groups them by host key) meet on
// it first (HostMeetings), and the lowest rank there arrives at the scheduler for them all. A
// worker learns its group from the cluster spec of its generation (WaitForShards), or from the
// scheduler's answer to a call it made alone, which sends it to meet them.
class MemberSession final : public JobMembership {
 public:
  // Registers (waiting up to connect_timeout for the scheduler to answer) and starts the
  // heartbeat.
  static absl::StatusOr<std::unique_ptr<MemberSession>> Join(const MemberSessionOptions& options);
  ~MemberSession() override;  // leaves as failed if Leave was not called

  // As registered (an elastic job's workers have another in each generation: WaitForShards).
  int rank() const override { return rank_; }
  // As the job started (an elastic job's number changes: WaitForShards).
  int num_workers() const override { return reply_.num_workers(); }
  int num_shards() const { return reply_.num_shards(); }
  const std::string& job_id() const { return reply_.job_id(); }
  const std::string& mode() const { return reply_.mode(); }
  // A shard that came back into a running job of replicated shards as a backup.
  bool joins_as_backup() const { return reply_.joins_as_backup(); }
  // Copies of every parameter part (2: each has a backup on another shard).
  int shard_replicas() const { return std::max(1, reply_.shard_replicas()); }
  const std::string& scheduler_address() const { return options_.scheduler_address; }
  // "worker 1", "shard 0": how messages name this member.
  std::string name() const override;

  absl::StatusOr<ShardsView> WaitForShards(
      absl::Duration timeout = absl::InfiniteDuration()) override;
  // Waits until every worker reached the barrier; see SchedulerCore::Barrier.
  absl::StatusOr<uint64_t> Barrier(const std::string& name, uint64_t fingerprint,
                                   int64_t generation = 0) override;
  // Barrier without a thread waiting: `done` gets its result on one of gRPC's threads. It must
  // not block; the session must outlive the call.
  using BarrierDone = std::function<void(absl::StatusOr<uint64_t>)>;
  void BarrierAsync(const std::string& name, uint64_t fingerprint, int64_t generation,
                    BarrierDone done);
  absl::StatusOr<std::vector<std::string>> Exchange(const std::string& name, std::string payload,
                                                    int64_t generation = 0) override;
  // Tells the scheduler this member leaves (OK: finished; else failed with the status's
  // message), waiting at most `timeout` for its answer, and stops the heartbeat.
  void Leave(const absl::Status& status, absl::Duration timeout = absl::Seconds(5));

  // Stops the heartbeat and closes the control stream without a word to the scheduler, as a
  // killed process's end looks to it; Leave does nothing after. For simulations of large jobs.
  void Vanish();

  // Workers: how far training is; sent with the following heartbeats.
  void SetProgress(const v1::Progress& progress) { core_.SetProgress(progress); }
  // Shards that came back into a job of replicated shards: the shares whose copies they hold;
  // sent with the following heartbeats.
  void SetCopiesHeld(std::vector<int> shares) { core_.SetCopiesHeld(std::move(shares)); }

  int OnEnd(std::function<void()> f) override { return core_.OnEnd(std::move(f)); }
  int OnGenerationChange(std::function<void(int64_t)> f) override {
    return core_.OnGenerationChange(std::move(f));
  }
  int64_t generation() const override { return core_.generation(); }
  void RemoveEndListener(int id) override { core_.RemoveEndListener(id); }
  absl::Status end_status() const override { return core_.end_status(); }
  bool ended() const { return core_.ended(); }
  bool WaitUntilEnded(absl::Duration timeout) { return core_.WaitUntilEnded(timeout); }

 private:
  MemberSession(MemberSessionOptions options, std::unique_ptr<v1::Scheduler::Stub> stub,
                v1::RegisterReply reply);
  // Registers again under this member's rank (MembershipCore::Rejoiner).
  absl::Status Rejoin();
  // One Barrier call, an exchange bringing payload where one is given (nullopt: a plain
  // barrier); done gets the scheduler's reply (a change of membership as
  // MembershipChangedError) on one of gRPC's threads.
  void CallBarrier(const std::string& name, uint64_t fingerprint, int64_t generation,
                   std::optional<std::string> payload,
                   std::function<void(absl::StatusOr<v1::BarrierReply>)> done,
                   const std::vector<HostMeetings::Arrival>& host_arrivals = {});
  // The workers of this one's host in a generation, as the cluster spec or the scheduler's
  // answer to a barrier call said.
  struct HostGroup {
    int64_t generation = -1;
    int leader = 0;
    int workers = 1;
  };
  // Where the group of a generation meets (an abstract socket's name, unique to the job).
  std::string PlaceOf(const HostGroup& group) const;
  // What this worker was told of its host's group; a group of generation -1 forgets it.
  void SetHostGroup(const HostGroup& group);
  // The generation moved past the group's, or the job ended: the meetings there end with `why`.
  void CloseHostGroup(int64_t past_generation, const absl::Status& why);

  const MemberSessionOptions options_;
  const std::unique_ptr<v1::Scheduler::Stub> stub_;
  const v1::RegisterReply reply_;
  const int rank_;
  RealClock clock_;
  const std::shared_ptr<HostMeetings> meetings_;  // workers'; outlives core_'s listeners
  MembershipCore core_;

  absl::Mutex mu_;
  bool left_ ABSL_GUARDED_BY(mu_) = false;
  HostGroup group_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_MEMBER_SESSION_H_
