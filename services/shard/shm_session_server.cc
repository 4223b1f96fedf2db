#include "services/shard/shm_session_server.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/time/clock.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<ShmSessionServer>> ShmSessionServer::Start(
    const std::string& name, size_t ring_bytes, size_t pool_bytes, std::string who,
    std::string otherwise, MakeSession make) {
  absl::StatusOr<std::unique_ptr<ShmListener>> listener =
      ShmListener::Listen(name, ring_bytes, pool_bytes);
  if (!listener.ok()) return listener.status();
  return std::unique_ptr<ShmSessionServer>(new ShmSessionServer(
      *std::move(listener), std::move(who), std::move(otherwise), std::move(make)));
}

ShmSessionServer::ShmSessionServer(std::unique_ptr<ShmListener> listener, std::string who,
                                   std::string otherwise, MakeSession make)
    : listener_(std::move(listener)),
      who_(std::move(who)),
      otherwise_(std::move(otherwise)),
      make_(std::move(make)),
      accepting_([this] { AcceptLoop(); }) {}

ShmSessionServer::~ShmSessionServer() {
  listener_->Close();
  accepting_.join();
  absl::MutexLock lock(&mu_);
  sessions_.clear();
}

void ShmSessionServer::AcceptLoop() {
  constexpr absl::Duration kFirstPause = absl::Milliseconds(10);
  absl::Duration pause = kFirstPause;
  for (;;) {
    absl::StatusOr<ShmChannel> channel = listener_->Accept();
    if (!channel.ok()) {
      if (absl::IsCancelled(channel.status())) return;
      std::cerr << "shard: warning: " << who_ << "'s shared-memory channel failed ("
                << channel.status() << "); " << otherwise_ << "\n"
                << std::flush;
      // Out of descriptors, say: neither a busy loop nor a flood of these lines.
      absl::SleepFor(pause);
      pause = std::min(2 * pause, absl::Seconds(1));
      continue;
    }
    pause = kFirstPause;
    absl::MutexLock lock(&mu_);
    sessions_.erase(std::remove_if(sessions_.begin(), sessions_.end(),
                                   [](const std::unique_ptr<ShmSession>& s) {
                                     return s->finished();
                                   }),
                    sessions_.end());
    sessions_.push_back(make_(*std::move(channel)));
    ++sessions_started_;
  }
}

}  // namespace cohort
