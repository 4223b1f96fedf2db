#include "services/scheduler/job_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include <nlohmann/json.hpp>

namespace cohort {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::Status(absl::ErrnoToStatusCode(errno),
                      absl::StrCat("journal ", path, ": ", what, ": ", std::strerror(errno)));
}

// Applies one line to state; a line that is not a whole entry (cut short by a crash) is skipped.
void Apply(const std::string& line, JournalState* state) {
  const nlohmann::json entry = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!entry.is_object()) return;
  if (entry.contains("job") && entry["job"].is_string()) {
    state->job_id = entry["job"].get<std::string>();
  } else if (entry.contains("finished") && entry["finished"].is_number_integer()) {
    state->finished_workers[entry["finished"].get<int>()] = {entry.value("host", ""),
                                                             entry.value("pid", int64_t{0})};
  } else if (entry.contains("shares") && entry["shares"].is_object()) {
    const nlohmann::json& s = entry["shares"];
    JournalShares shares;
    const auto ints = [&s](const char* name, std::vector<int>* out) {
      if (!s.contains(name) || !s[name].is_array()) return false;
      for (const nlohmann::json& v : s[name]) {
        if (!v.is_number_integer()) return false;
        out->push_back(v.get<int>());
      }
      return true;
    };
    std::vector<int> copied;
    if (ints("leaders", &shares.leaders) && ints("backups", &shares.backups) &&
        ints("copied", &copied) && ints("dead", &shares.dead) &&
        shares.backups.size() == shares.leaders.size() &&
        copied.size() == shares.leaders.size()) {
      shares.copied.assign(copied.begin(), copied.end());
      state->shares = std::move(shares);
    }
  } else if (entry.contains("end") && entry["end"].is_string()) {
    state->end = entry["end"] == JobStateName(JobState::kDone) ? JobState::kDone
                                                               : JobState::kFailed;
    state->reason = entry.value("reason", "");
  }
}

}  // namespace

std::string DescribeJournal(const JournalState& state) {
  if (state.end.has_value()) {
    return absl::StrCat("the job ended ", JobStateName(*state.end), " (", state.reason, ")");
  }
  if (state.finished_workers.empty()) return "nothing happened yet";
  return absl::StrCat(state.finished_workers.size() == 1 ? "worker " : "workers ",
                      absl::StrJoin(state.finished_workers, ", ",
                                    [](std::string* out, const auto& w) {
                                      absl::StrAppend(out, w.first);
                                    }),
                      " finished");
}

absl::StatusOr<JournalState> ReadJournal(const std::string& path) {
  JournalState state;
  std::ifstream in(path);
  if (!in.is_open()) {
    if (errno == ENOENT) return state;
    return Errno("cannot read it", path);
  }
  for (std::string line; std::getline(in, line);) Apply(line, &state);
  return state;
}

absl::StatusOr<std::unique_ptr<JobJournal>> JobJournal::Open(const std::string& path,
                                                             const std::string& job_id) {
  absl::StatusOr<JournalState> state = ReadJournal(path);
  if (!state.ok()) return state.status();
  if (!state->job_id.empty() && state->job_id != job_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " is job ", state->job_id, "'s, not job ", job_id,
                     "'s: give each job its own --journal"));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot open it for appending", path);
  std::unique_ptr<JobJournal> journal(new JobJournal(path, fd, *std::move(state)));
  if (journal->state_.job_id.empty()) {
    if (absl::Status s = journal->Append(nlohmann::json{{"job", job_id}}); !s.ok()) return s;
  }
  return journal;
}

JobJournal::~JobJournal() { close(fd_); }

absl::Status JobJournal::RecordFinished(int rank, const std::string& host, int64_t pid) {
  return Append(nlohmann::json{{"finished", rank}, {"host", host}, {"pid", pid}});
}

absl::Status JobJournal::RecordShares(const JournalShares& shares) {
  const std::vector<int> copied(shares.copied.begin(), shares.copied.end());
  return Append(nlohmann::json{{"shares",
                                {{"leaders", shares.leaders},
                                 {"backups", shares.backups},
                                 {"copied", copied},
                                 {"dead", shares.dead}}}});
}

absl::Status JobJournal::RecordEnd(JobState state, const std::string& reason) {
  return Append(nlohmann::json{{"end", JobStateName(state)}, {"reason", reason}});
}

absl::Status JobJournal::Append(const nlohmann::json& entry) {
  // Names and reasons are a member's words: bytes that are not UTF-8 are replaced, not refused.
  const std::string line =
      entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  Apply(line, &state_);
  // One write of an O_APPEND file: a reader sees the whole line or, after a crash, part of it.
  const ssize_t n = write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) return Errno("cannot append to it", path_);
  if (fdatasync(fd_) != 0) return Errno("cannot sync it", path_);
  return absl::OkStatus();
}

}  // namespace cohort
