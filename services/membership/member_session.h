#ifndef COHORT_SERVICES_MEMBERSHIP_MEMBER_SESSION_H_
#define COHORT_SERVICES_MEMBERSHIP_MEMBER_SESSION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/scheduler.grpc.pb.h"
#include "services/membership/job_membership.h"

namespace cohort {

struct MemberSessionOptions {
  std::string scheduler_address;  // host:port
  v1::Role role = v1::WORKER;
  int requested_rank = -1;  // -1: the scheduler picks
  // Shards: the port their service listens on and, optionally, the host workers should dial.
  int port = 0;
  std::string advertise_host;
  absl::Duration connect_timeout = absl::Seconds(60);  // to reach the scheduler at first
  absl::Duration heartbeat_interval = absl::Milliseconds(250);
  // Without an answer from the scheduler for this long the member gives up (Contracts,
  // "Failure": it waits this grace period to reconnect, then exits).
  absl::Duration scheduler_grace = absl::Seconds(3);
};

// A shard's or worker's membership in a job: registers with the scheduler, keeps a heartbeat
// on the control stream from a background thread, and learns there when the job ends. The
// end (DONE, FAILED with the scheduler's reason, or the scheduler lost) is reported once to
// the listeners, from the heartbeat thread. Thread-safe.
class MemberSession final : public JobMembership {
 public:
  // Registers (waiting up to connect_timeout for the scheduler to answer) and starts the
  // heartbeat.
  static absl::StatusOr<std::unique_ptr<MemberSession>> Join(const MemberSessionOptions& options);
  ~MemberSession() override;  // leaves as finished if Leave was not called

  int rank() const override { return rank_; }
  int num_workers() const override { return reply_.num_workers(); }
  int num_shards() const { return reply_.num_shards(); }
  const std::string& job_id() const { return reply_.job_id(); }
  const std::string& mode() const { return reply_.mode(); }
  const std::string& scheduler_address() const { return options_.scheduler_address; }
  // "worker 1", "shard 0": how messages name this member.
  std::string name() const override;

  // Waits until every member has registered; shard addresses by shard rank.
  absl::StatusOr<std::vector<std::string>> WaitForCluster();
  // Waits until every worker reached the barrier; see SchedulerCore::Barrier.
  absl::StatusOr<uint64_t> Barrier(const std::string& name, uint64_t fingerprint) override;
  // Tells the scheduler this member leaves (OK: finished; else failed with the status's
  // message) and stops the heartbeat.
  void Leave(const absl::Status& status);

  // Workers: how far training is; sent with the following heartbeats.
  void SetProgress(const v1::Progress& progress);

  int OnEnd(std::function<void()> f) override;
  void RemoveEndListener(int id) override;
  // OK while running and after DONE; Aborted with the reason after FAILED; Unavailable after
  // the scheduler was lost.
  absl::Status end_status() const override;
  bool ended() const;
  // Blocks until the job ends; false after timeout.
  bool WaitUntilEnded(absl::Duration timeout);

 private:
  MemberSession(MemberSessionOptions options, std::unique_ptr<v1::Scheduler::Stub> stub,
                v1::RegisterReply reply);
  void HeartbeatLoop();
  // One control stream's life: heartbeats until it breaks, the job ends or we leave. Returns
  // why it ended when it broke.
  std::string RunControlStream();
  void End(v1::JobState state, const std::string& reason);

  const MemberSessionOptions options_;
  const std::unique_ptr<v1::Scheduler::Stub> stub_;
  const v1::RegisterReply reply_;
  const int rank_;

  mutable absl::Mutex mu_;
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  absl::Time last_answer_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::Progress> progress_ ABSL_GUARDED_BY(mu_);
  // Held while listeners run, so that one removed is not running any more.
  absl::Mutex listeners_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::vector<std::pair<int, std::function<void()>>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  int next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 0;
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread heartbeat_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_MEMBER_SESSION_H_
