#ifndef COHORT_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_
#define COHORT_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "proto/scheduler.grpc.pb.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

class ControlReactor;

// The members' open control streams, told each change of the job at once.
class ControlStreams {
 public:
  void Add(ControlReactor* stream);
  void Remove(ControlReactor* stream);  // before it is deleted; again is no harm
  // Runs under the core's lock (SchedulerCore::SetChangeListener).
  void Changed(JobState state, int64_t generation, const std::string& reason);

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<ControlReactor*> streams_ ABSL_GUARDED_BY(mu_);
};

// The Scheduler gRPC service over a SchedulerCore. The core must outlive the service. A
// member's control stream, a barrier and a wait for the cluster hold no thread while they wait
// (gRPC's callback API): a job of a thousand workers would need a thousand.
class SchedulerService final
    : public v1::Scheduler::WithCallbackMethod_Control<v1::Scheduler::WithCallbackMethod_Barrier<
          v1::Scheduler::WithCallbackMethod_GetClusterSpec<v1::Scheduler::Service>>> {
 public:
  // Listens to the core's changes (SetChangeListener): the core must not outlive the service
  // while it runs.
  explicit SchedulerService(SchedulerCore* core);

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterReply* reply) override;
  grpc::ServerUnaryReactor* GetClusterSpec(grpc::CallbackServerContext* context,
                                           const v1::ClusterSpecRequest* request,
                                           v1::ClusterSpec* spec) override;
  grpc::ServerBidiReactor<v1::Heartbeat, v1::ControlMessage>* Control(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* context,
                                    const v1::BarrierRequest* request,
                                    v1::BarrierReply* reply) override;
  grpc::Status Stop(grpc::ServerContext* context, const v1::StopRequest* request,
                    v1::StopReply* reply) override;

 private:
  SchedulerCore* const core_;
  ControlStreams streams_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_
