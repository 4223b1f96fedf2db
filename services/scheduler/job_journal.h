#ifndef COHORT_SERVICES_SCHEDULER_JOB_JOURNAL_H_
#define COHORT_SERVICES_SCHEDULER_JOB_JOURNAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/scheduler/job_status.h"

namespace cohort {

// Replicated shards as the last change left them: by share (a shard rank's part of the model),
// the rank leading it, the rank backing it up (-1: none) and whether that one holds its copy;
// and the shard ranks dead now (they will not register again).
struct JournalShares {
  std::vector<int> leaders;
  std::vector<int> backups;
  std::vector<bool> copied;
  std::vector<int> dead;
};

// What a scheduler that took over a running job must know and no member can tell it again: the
// workers that already finished (they have left), who leads and backs up each share of a job
// of replicated shards, and how the job ended.
struct JournalState {
  std::string job_id;  // whose journal it is
  struct Finished {
    std::string host;
    int64_t pid = 0;
  };
  std::map<int, Finished> finished_workers;  // by registered rank
  std::optional<JournalShares> shares;       // the latest, once a replicated shard died
  std::optional<JobState> end;               // kDone or kFailed, once the job ended
  std::string reason;                        // why it ended
};

// The scheduler's journal (--journal): one JSON object a line, appended and fsynced before the
// scheduler answers, so a scheduler restarted after a crash (launch --restart_scheduler) reads
// what the one before it told the members, and the launcher reads whether the job is DONE.
// A line cut short by a crash is ignored. Not thread-safe: the scheduler core holds its lock.
class JobJournal {
 public:
  // Opens job_id's journal at path for appending (created if missing); state() is what it
  // held. Another job's journal is refused.
  static absl::StatusOr<std::unique_ptr<JobJournal>> Open(const std::string& path,
                                                          const std::string& job_id);
  ~JobJournal();

  const JournalState& state() const { return state_; }
  absl::Status RecordFinished(int rank, const std::string& host, int64_t pid);
  absl::Status RecordEnd(JobState state, const std::string& reason);
  absl::Status RecordShares(const JournalShares& shares);

 private:
  JobJournal(std::string path, int fd, JournalState state)
      : path_(std::move(path)), fd_(fd), state_(std::move(state)) {}
  absl::Status Append(const nlohmann::json& entry);

  const std::string path_;
  const int fd_;
  JournalState state_;
};

// "workers 0, 1 finished", "the job ended DONE (all 2 workers finished)".
std::string DescribeJournal(const JournalState& state);

// The journal at path as it stands (a missing file: nothing recorded yet).
absl::StatusOr<JournalState> ReadJournal(const std::string& path);

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_JOB_JOURNAL_H_
