#include "services/scheduler/job_status.h"

#include <nlohmann/json.hpp>

#include <algorithm>

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

JobProgress SummarizeProgress(const JobStatus& status) {
  JobProgress job;
  for (const MemberStatus& m : status.members) {
    if (!m.progress.has_value()) continue;
    const WorkerProgress& p = *m.progress;
    job.step = std::max(job.step, p.step);
    job.total_steps = std::max(job.total_steps, p.total_steps);
    if (p.test_top1.has_value()) job.test_top1 = p.test_top1;
    if (m.state != MemberState::kAlive) continue;
    ++job.reporting;
    job.images_per_second += p.images_per_second;
    job.loss += p.loss;
    job.communication_overhead += p.communication_overhead;
    if (p.total_steps > 0 && p.step_seconds > 0) {
      const double eta = static_cast<double>(std::max<int64_t>(0, p.total_steps - p.step)) *
                         p.step_seconds;
      job.eta_seconds = std::max(job.eta_seconds.value_or(0), eta);
    }
  }
  if (job.reporting > 0) {
    job.loss /= job.reporting;
    job.communication_overhead /= job.reporting;
  }
  if (status.state == JobState::kDone) {  // every worker ran every step
    job.step = job.total_steps;
    job.eta_seconds = 0;
  }
  return job;
}

std::string JobStatusJson(const JobStatus& status) {
  nlohmann::json members = nlohmann::json::array();
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
                            {"loss", p.loss},
                            {"total_steps", p.total_steps}};
      if (p.test_top1.has_value()) member["progress"]["test_top1"] = *p.test_top1;
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
                      {"members", members}};
  const JobProgress progress = SummarizeProgress(status);
  j["images_per_second"] = progress.images_per_second;
  j["step"] = progress.step;
  j["total_steps"] = progress.total_steps;
  j["eta_seconds"] = progress.eta_seconds.has_value() ? nlohmann::json(*progress.eta_seconds)
                                                      : nlohmann::json(nullptr);
  j["test_top1"] = progress.test_top1.has_value() ? nlohmann::json(*progress.test_top1)
                                                  : nlohmann::json(nullptr);
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
