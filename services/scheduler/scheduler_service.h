#ifndef COHORT_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_
#define COHORT_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_

#include "proto/scheduler.grpc.pb.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

// The Scheduler gRPC service over a SchedulerCore. The core must outlive the service. A
// member's control stream, a barrier and a wait for the cluster hold no thread while they wait
// (gRPC's callback API): a job of a thousand workers would need a thousand.
class SchedulerService final
    : public v1::Scheduler::WithCallbackMethod_Control<v1::Scheduler::WithCallbackMethod_Barrier<
          v1::Scheduler::WithCallbackMethod_GetClusterSpec<v1::Scheduler::Service>>> {
 public:
  explicit SchedulerService(SchedulerCore* core) : core_(core) {}

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
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_
