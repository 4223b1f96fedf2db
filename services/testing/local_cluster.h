#ifndef COHORT_SERVICES_TESTING_LOCAL_CLUSTER_H_
#define COHORT_SERVICES_TESTING_LOCAL_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "services/common/clock.h"
#include "services/common/grpc_util.h"
#include "services/membership/member_session.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_service.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_service.h"
#include "trainer/kvstore/kvstore_mode.h"

namespace cohort {

// For tests: a job's scheduler and shards in this process, serving on loopback ports the kernel
// picks; workers join at address() (kvstore::Create with JobOptions, or a MemberSession).
class LocalCluster {
 public:
  LocalCluster(KVStoreMode mode, int num_workers, int num_shards);
  ~LocalCluster();

  const std::string& address() const { return address_; }
  SchedulerCore& core() { return core_; }

 private:
  struct Shard {
    ShardCore core;
    std::unique_ptr<ShardService> service;
    RunningServer server;
    std::unique_ptr<MemberSession> session;
  };

  RealClock clock_;
  SchedulerCore core_;
  SchedulerService service_;
  RunningServer scheduler_;
  std::string address_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_TESTING_LOCAL_CLUSTER_H_
