#include "services/membership/membership_core.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace cohort {

MembershipCore::MembershipCore(std::string name, v1::Role role, int rank, std::string scheduler,
                               MembershipTiming timing, StreamOpener open_stream, Clock* clock,
                               Rejoiner rejoin)
    : name_(std::move(name)),
      role_(role),
      rank_(rank),
      scheduler_(std::move(scheduler)),
      timing_(timing),
      open_stream_(std::move(open_stream)),
      clock_(clock),
      rejoin_(std::move(rejoin)) {}

MembershipCore::~MembershipCore() { Stop(); }

void MembershipCore::Start() {
  {
    absl::MutexLock lock(&mu_);
    last_answer_ = clock_->Now();
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

void MembershipCore::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

void MembershipCore::SetProgress(const v1::Progress& progress) {
  absl::MutexLock lock(&mu_);
  progress_ = progress;
}

void MembershipCore::SetCopiesHeld(std::vector<int> shares) {
  absl::MutexLock lock(&mu_);
  copies_held_ = std::move(shares);
}

int MembershipCore::OnEnd(std::function<void()> f) {
  absl::MutexLock listeners(&listeners_mu_);
  const int id = next_listener_++;
  if (ended()) {
    f();
  } else {
    listeners_.emplace_back(id, std::move(f));
  }
  return id;
}

int MembershipCore::OnGenerationChange(std::function<void(int64_t)> f) {
  absl::MutexLock listeners(&listeners_mu_);
  const int id = next_listener_++;
  generation_listeners_.emplace_back(id, std::move(f));
  return id;
}

void MembershipCore::RemoveEndListener(int id) {
  absl::MutexLock listeners(&listeners_mu_);
  const auto is_id = [id](const auto& listener) { return listener.first == id; };
  listeners_.erase(std::remove_if(listeners_.begin(), listeners_.end(), is_id), listeners_.end());
  generation_listeners_.erase(
      std::remove_if(generation_listeners_.begin(), generation_listeners_.end(), is_id),
      generation_listeners_.end());
}

int64_t MembershipCore::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void MembershipCore::SawGeneration(int64_t generation) {
  absl::MutexLock listeners(&listeners_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (generation <= generation_) return;
    generation_ = generation;
  }
  for (auto& [id, f] : generation_listeners_) f(generation);
}

absl::Status MembershipCore::end_status() const {
  absl::MutexLock lock(&mu_);
  return end_status_;
}

bool MembershipCore::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

bool MembershipCore::WaitUntilEnded(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&listeners_ran_), timeout);
}

void MembershipCore::End(v1::JobState state, const std::string& reason) {
  absl::MutexLock listeners(&listeners_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    if (state == v1::FAILED) {
      end_status_ = absl::AbortedError(absl::StrCat("the job failed: ", reason));
    } else if (state != v1::DONE) {
      end_status_ = absl::UnavailableError(reason);
    }
  }
  for (auto& [id, f] : listeners_) f();
  listeners_.clear();
  absl::MutexLock lock(&mu_);
  listeners_ran_ = true;
}

std::string MembershipCore::RunControlStream() {
  const std::unique_ptr<ControlStream> stream = open_stream_();
  absl::Notification reader_done;
  std::thread reader([&] {
    v1::ControlMessage message;
    while (stream->Read(&message)) {
      {
        absl::MutexLock lock(&mu_);
        last_answer_ = clock_->Now();
      }
      SawGeneration(message.generation());
      if (message.state() == v1::DONE || message.state() == v1::FAILED) {
        End(message.state(), message.reason());
      }
    }
    reader_done.Notify();
  });
  v1::Heartbeat heartbeat;
  heartbeat.set_role(role_);
  heartbeat.set_rank(rank_);
  heartbeat.set_pid(getpid());
  std::string broke;
  const auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || ended_; };
  {
    absl::MutexLock lock(&mu_);
    while (!stop()) {
      const absl::Duration silent = clock_->Now() - last_answer_;
      if (silent > timing_.scheduler_grace) {
        broke = absl::StrCat("no answer for ",
                             absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(100))));
        break;
      }
      if (progress_.has_value()) *heartbeat.mutable_progress() = *progress_;
      heartbeat.mutable_holds_copies_of()->Assign(copies_held_.begin(), copies_held_.end());
      mu_.Unlock();
      const bool written = !reader_done.HasBeenNotified() && stream->Write(heartbeat);
      mu_.Lock();
      if (!written) {
        broke = "the control stream broke";
        break;
      }
      mu_.AwaitWithTimeout(absl::Condition(&stop), timing_.heartbeat_interval);
    }
  }
  if (broke.empty()) {
    stream->WritesDone();
    // The scheduler closes its side when it sees ours closed; don't wait on a hung one.
    if (!reader_done.WaitForNotificationWithTimeout(timing_.close_wait)) stream->Cancel();
  } else {
    stream->Cancel();
  }
  reader.join();
  const absl::Status status = stream->Finish();
  if (!broke.empty() && !status.ok()) absl::StrAppend(&broke, " (", status.message(), ")");
  return broke;
}

void MembershipCore::HeartbeatLoop() {
  for (bool reconnecting = false;; reconnecting = true) {
    std::string broke;
    if (reconnecting && rejoin_ != nullptr) {
      if (const absl::Status s = rejoin_(); !s.ok()) {
        broke = absl::StrCat("registering again: ", s.message());
      }
    }
    if (broke.empty()) broke = RunControlStream();
    absl::MutexLock lock(&mu_);
    if (stopping_ || ended_) return;
    // The stream broke: reconnect until the grace period since the last answer runs out.
    const absl::Duration silent = clock_->Now() - last_answer_;
    if (silent > timing_.scheduler_grace) {
      mu_.Unlock();
      End(v1::JOB_STATE_UNSPECIFIED,
          absl::StrCat(name_, " lost the scheduler at ", scheduler_, ": ", broke,
                       "; no reconnect within ", absl::FormatDuration(timing_.scheduler_grace),
                       " (--scheduler_grace)"));
      mu_.Lock();
      return;
    }
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), timing_.heartbeat_interval);
    if (stopping_) return;
  }
}

}  // namespace cohort
