#ifndef COHORT_SERVICES_SHARD_GRPC_REPLICA_LINK_H_
#define COHORT_SERVICES_SHARD_GRPC_REPLICA_LINK_H_

#include <deque>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/shard.grpc.pb.h"
#include "services/shard/shard_core.h"

namespace cohort {

// A leader's ReplicaLink to the shard backing its parts up: one Replicate stream. Forward
// copies the update into a message and returns; a thread of the link writes them in order,
// those waiting together as one batch (up to kBatchBytes), and another runs each update's done
// as the backup acknowledges it. Once the stream fails
// (the backup died, or refused an update), the link gives every update not acknowledged up (its
// done runs: the parts go on without a backup) and says so once on err, unless the job is over
// (a backup ends its stream as it leaves a job that ended).
class GrpcReplicaLink final : public ReplicaLink {
 public:
  // leader: how messages name this shard ("shard 0"); backup: the backup's name and address;
  // job_over: whether the job has ended (null: not known).
  GrpcReplicaLink(std::unique_ptr<v1::Shard::Stub> stub, std::string leader, std::string backup,
                  std::ostream* err, std::function<bool()> job_over = nullptr);
  // Ends the stream; every done not run yet runs before it returns.
  ~GrpcReplicaLink() override;

  void Forward(const ReplicaUpdate& update, std::function<void()> done) override;

  // A batch takes the updates waiting until it holds this many bytes of values (the data
  // path's fusion size: docs/benchmarks.md, "Small tensors").
  static constexpr size_t kBatchBytes = 256 << 10;
  // How long after the stream's failure the job is looked at: a backup leaving a job that
  // ended may end its stream a moment before this shard hears of the end.
  static constexpr absl::Duration kJobEndLag = absl::Milliseconds(200);
  // Whether the stream failed (every later update is given up at once).
  bool broken() const;

 private:
  struct Queued {
    v1::ReplicaUpdate message;
    std::function<void()> done;
  };
  void WriteLoop();
  void ReadLoop();
  // The stream failed: said, unless the link is closing or the job is over.
  void Say(const grpc::Status& why);
  // Runs the dones of updates sent and not acknowledged.
  void GiveUpSent();

  const std::unique_ptr<v1::Shard::Stub> stub_;
  const std::string leader_;
  const std::string backup_;
  std::ostream* const err_;
  const std::function<bool()> job_over_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ReplicaBatch, v1::ReplicaAck>> stream_;

  mutable absl::Mutex mu_;
  std::deque<Queued> to_send_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> sent_ ABSL_GUARDED_BY(mu_);  // not acknowledged yet
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = true;
  std::thread writer_;
  std::thread reader_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_GRPC_REPLICA_LINK_H_
