#ifndef COHORT_SERVICES_SHARD_GRPC_REPLICA_LINK_H_
#define COHORT_SERVICES_SHARD_GRPC_REPLICA_LINK_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
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
// those waiting together as one batch (up to the data path's fusion size), and another runs
// each update's done as the backup acknowledges it. Once the stream ends, the link gives every
// update not acknowledged up (its done runs: the parts go on without a backup) and, unless the
// backup cancelled it as it left a job that ended (ShardService::CloseReplication), says why
// on err: the backup died, or refused an update.
class GrpcReplicaLink final : public ReplicaLink {
 public:
  // leader: how messages name this shard ("shard 0"); backup: the backup's name and address.
  GrpcReplicaLink(std::unique_ptr<v1::Shard::Stub> stub, std::string leader, std::string backup,
                  std::ostream* err);
  // Ends the stream; every done not run yet runs before it returns.
  ~GrpcReplicaLink() override;

  void Forward(const ReplicaUpdate& update, std::function<void()> done) override;

  // Whether the stream failed (every later update is given up at once).
  bool broken() const override;

 private:
  struct Queued {
    v1::ReplicaUpdate message;
    std::function<void()> done;
    std::optional<v1::InitMessage::Config> config;  // for the batch it goes in
  };
  void WriteLoop();
  void ReadLoop();
  // How the stream ended, said unless the link is closing or the backup left.
  void Say(const grpc::Status& why);
  // Runs the dones of updates sent and not acknowledged.
  void GiveUpSent();

  const std::unique_ptr<v1::Shard::Stub> stub_;
  const std::string leader_;
  const std::string backup_;
  std::ostream* const err_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ReplicaBatch, v1::ReplicaAck>> stream_;

  mutable absl::Mutex mu_;
  std::deque<Queued> to_send_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> sent_ ABSL_GUARDED_BY(mu_);  // not acknowledged yet
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool config_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = true;
  std::thread writer_;
  std::thread reader_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_GRPC_REPLICA_LINK_H_
