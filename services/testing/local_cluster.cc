#include "services/testing/local_cluster.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "trainer/base/check.h"

namespace cohort {
namespace {

JobSpec Spec(KVStoreMode mode, int num_workers, int num_shards) {
  JobSpec s;
  s.job_id = "job-local-cluster";
  s.num_workers = num_workers;
  s.num_shards = num_shards;
  s.mode = mode;
  return s;
}

}  // namespace

LocalCluster::LocalCluster(KVStoreMode mode, int num_workers, int num_shards)
    : core_(Spec(mode, num_workers, num_shards), &clock_), service_(&core_) {
  auto scheduler = StartServer("127.0.0.1", 0, {&service_});
  COHORT_CHECK(scheduler.ok(), "scheduler: %s", std::string(scheduler.status().message()).c_str());
  scheduler_ = std::move(*scheduler);
  address_ = absl::StrCat("127.0.0.1:", scheduler_.port);
  for (int s = 0; s < num_shards; ++s) {
    shards_.push_back(std::make_unique<Shard>());
    Shard& p = *shards_.back();
    p.service = std::make_unique<ShardService>(&p.core);
    auto server = StartServer("127.0.0.1", 0, {p.service.get()});
    COHORT_CHECK(server.ok(), "shard: %s", std::string(server.status().message()).c_str());
    p.server = std::move(*server);
    MemberSessionOptions o;
    o.scheduler_address = address_;
    o.role = v1::SHARD;
    o.requested_rank = s;
    o.port = p.server.port;
    auto session = MemberSession::Join(o);
    COHORT_CHECK(session.ok(), "shard session: %s",
                 std::string(session.status().message()).c_str());
    p.session = std::move(*session);
    p.core.set_rank(s);
  }
}

LocalCluster::~LocalCluster() {
  for (auto& s : shards_) {
    s->server.Shutdown(std::chrono::system_clock::now());
    s->session->Leave(absl::OkStatus());
  }
  scheduler_.Shutdown(std::chrono::system_clock::now());
}

}  // namespace cohort
