#include "services/scheduler/job_status.h"

#include <nlohmann/json.hpp>

namespace cohort {

const char* RoleName(MemberRole role) { return role == MemberRole::kShard ? "shard" : "worker"; }

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kForming:
      return "FORMING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kDone:
      return "DONE";
    case JobState::kFailed:
      return "FAILED";
  }
  return "?";
}

const char* MemberStateName(MemberState state) {
  switch (state) {
    case MemberState::kMissing:
      return "missing";
    case MemberState::kAlive:
      return "alive";
    case MemberState::kStopped:
      return "stopped";
    case MemberState::kDead:
      return "dead";
  }
  return "?";
}

std::string JobStatusJson(const JobStatus& status) {
  nlohmann::json members = nlohmann::json::array();
  double images_per_second = 0;
  for (const MemberStatus& m : status.members) {
    nlohmann::json member = {{"role", RoleName(m.role)},
                             {"rank", m.rank},
                             {"state", MemberStateName(m.state)},
                             {"host", m.host},
                             {"pid", m.pid},
                             {"address", m.address},
                             {"seconds_since_heartbeat", m.seconds_since_heartbeat},
                             {"last_error", m.last_error}};
    if (m.progress.has_value()) {
      const WorkerProgress& p = *m.progress;
      member["progress"] = {{"step", p.step},
                            {"epoch", p.epoch},
                            {"images_per_second", p.images_per_second},
                            {"step_seconds", p.step_seconds},
                            {"communication_overhead", p.communication_overhead},
                            {"loss", p.loss}};
      if (m.state == MemberState::kAlive) images_per_second += p.images_per_second;
    }
    members.push_back(std::move(member));
  }
  nlohmann::json j = {{"job_id", status.job_id},
                      {"state", JobStateName(status.state)},
                      {"reason", status.reason},
                      {"mode", std::string(KVStoreModeName(status.mode))},
                      {"num_workers", status.workers.size()},
                      {"generation", status.generation},
                      {"workers", status.workers},
                      {"num_shards", status.num_shards},
                      {"seconds_since_start", status.seconds_since_start},
                      {"images_per_second", images_per_second},
                      {"members", members}};
  if (const std::optional<Straggler>& s = status.straggler) {
    j["straggler"] = {{"rank", s->rank},
                      {"host", s->host},
                      {"compute_seconds", s->compute_seconds},
                      {"fastest_rank", s->fastest_rank},
                      {"lag_seconds", s->lag_seconds},
                      {"lag_steps", s->lag_steps}};
  }
  return j.dump();
}

}  // namespace cohort
