#include "services/scheduler/job_history.h"

#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "services/common/count_text.h"

namespace cohort {

namespace {

std::string Who(const MemberStatus& m) {
  return absl::StrCat(RoleName(m.role), " ", m.rank, m.host.empty() ? "" : " (host ", m.host,
                      m.host.empty() ? "" : ")");
}

// What a member's change from `before` (nullopt: not in the previous snapshot) to `now` was,
// or empty when it is not news.
std::string MemberChange(const std::optional<MemberStatus>& before, const MemberStatus& now) {
  const MemberState was = before.has_value() ? before->state : MemberState::kMissing;
  if (was == now.state) {
    if (before.has_value() && now.state == MemberState::kAlive && before->pid != now.pid) {
      return absl::StrCat(Who(now), " came back as pid ", now.pid, " (was pid ", before->pid, ")");
    }
    return "";
  }
  switch (now.state) {
    case MemberState::kAlive:
      return was == MemberState::kMissing
                 ? absl::StrCat(Who(now), " joined")
                 : absl::StrCat(Who(now), " came back as pid ", now.pid);
    case MemberState::kDead:
      return absl::StrCat(Who(now), " died",
                          now.last_error.empty() ? "" : absl::StrCat(": ", now.last_error));
    case MemberState::kStopped:
      return now.last_error.empty() ? absl::StrCat(Who(now), " finished")
                                    : absl::StrCat(Who(now), " stopped: ", now.last_error);
    case MemberState::kMissing:
      return "";
  }
  return "";
}

}  // namespace

JobHistory::JobHistory(size_t max_samples, size_t max_events)
    : max_samples_(std::max<size_t>(max_samples, 2)), max_events_(max_events) {}

void JobHistory::Record(const JobStatus& status) {
  absl::MutexLock lock(&mu_);
  CompareWithPrevious(status);
  previous_ = status;
  if (recorded_++ % stride_ != 0) return;
  const JobProgress progress = SummarizeProgress(status);
  if (progress.reporting == 0 && status.state != JobState::kRunning) return;
  samples_.push_back({status.seconds_since_start, progress});
  if (samples_.size() < max_samples_) return;
  // Thin to every other sample, the first kept; sample half as often from now on.
  size_t kept = 0;
  for (size_t i = 0; i < samples_.size(); i += 2) samples_[kept++] = samples_[i];
  samples_.resize(kept);
  stride_ *= 2;
}

void JobHistory::CompareWithPrevious(const JobStatus& status) {
  const double t = status.seconds_since_start;
  if (!previous_.has_value() || previous_->state != status.state) {
    Add(t, absl::StrCat("job ", JobStateName(status.state),
                        status.reason.empty() ? "" : absl::StrCat(": ", status.reason)));
  }
  if (previous_.has_value() && previous_->generation != status.generation) {
    Add(t, absl::StrCat("generation ", status.generation, ": ",
                        Count(status.workers.size(), "worker")));
  }
  std::map<std::pair<MemberRole, int>, MemberStatus> before;
  if (previous_.has_value()) {
    for (const MemberStatus& m : previous_->members) before[{m.role, m.rank}] = m;
  }
  for (const MemberStatus& m : status.members) {
    const auto it = before.find({m.role, m.rank});
    std::string change = MemberChange(
        it == before.end() ? std::nullopt : std::make_optional(it->second), m);
    if (!change.empty()) Add(t, std::move(change));
  }
}

void JobHistory::Add(double t, std::string text) {
  events_.push_back({t, std::move(text)});
  if (events_.size() <= max_events_) return;
  events_.erase(events_.begin());
  ++events_dropped_;
}

std::string JobHistory::Json() const {
  absl::MutexLock lock(&mu_);
  nlohmann::json samples = nlohmann::json::array();
  for (const Sample& s : samples_) {
    const JobProgress& p = s.progress;
    samples.push_back({{"t", s.t},
                       {"step", p.step},
                       {"images_per_second", p.images_per_second},
                       {"loss", p.reporting > 0 ? nlohmann::json(p.loss) : nlohmann::json()},
                       {"comm", p.reporting > 0 ? nlohmann::json(p.communication_overhead)
                                                : nlohmann::json()},
                       {"test_top1", p.test_top1.has_value() ? nlohmann::json(*p.test_top1)
                                                             : nlohmann::json()},
                       {"workers", p.reporting}});
  }
  nlohmann::json events = nlohmann::json::array();
  for (const Event& e : events_) events.push_back({{"t", e.t}, {"text", e.text}});
  return nlohmann::json{{"samples", samples}, {"events", events}, {"events_dropped", events_dropped_}}
      .dump();
}

}  // namespace cohort
