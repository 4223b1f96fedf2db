#include "services/common/connection_limiter.h"

namespace cohort {

std::vector<ConnectionLimiter::Id> ConnectionLimiter::Opened(Id id, const std::string& peer,
                                                             absl::Time now) {
  connections_[id] = Connection{peer, now};
  ++counted_;
  ++counted_by_peer_[peer];
  std::vector<Id> to_close;
  for (const auto& [other, connection] : connections_) {
    if (!connection.asking && !connection.closing &&
        now - connection.waiting_since > limits_.request_deadline) {
      to_close.push_back(other);
    }
  }
  for (Id late : to_close) Close(late, nullptr);  // already listed
  // The new connection goes itself only when every other one counted is being answered (or,
  // with a peer grace, never for its peer's count: it is younger than the grace).
  const absl::Time past_grace = now - limits_.peer_grace;
  while (!connections_[id].closing && counted_by_peer_[peer] > limits_.max_connections_per_peer) {
    Id longest = LongestWaiting(&peer, id, past_grace);
    if (longest == nullptr && limits_.peer_grace > absl::ZeroDuration()) break;
    Close(longest != nullptr ? longest : id, &to_close);
  }
  while (!connections_[id].closing && counted_ > limits_.max_connections) {
    Id longest = LongestWaiting(nullptr, id, absl::InfiniteFuture());
    Close(longest != nullptr ? longest : id, &to_close);
  }
  return to_close;
}

void ConnectionLimiter::Asked(Id id) {
  if (auto it = connections_.find(id); it != connections_.end()) it->second.asking = true;
}

void ConnectionLimiter::Answered(Id id, absl::Time now) {
  if (auto it = connections_.find(id); it != connections_.end()) {
    it->second.asking = false;
    it->second.waiting_since = now;
  }
}

void ConnectionLimiter::Closed(Id id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (!it->second.closing) {
    --counted_;
    if (--counted_by_peer_[it->second.peer] == 0) counted_by_peer_.erase(it->second.peer);
  }
  connections_.erase(it);
}

ConnectionLimiter::Id ConnectionLimiter::LongestWaiting(const std::string* peer, Id except,
                                                       absl::Time since) const {
  Id longest = nullptr;
  for (const auto& [id, connection] : connections_) {
    if (id == except || connection.asking || connection.closing) continue;
    if (peer != nullptr && connection.peer != *peer) continue;
    if (connection.waiting_since <= since) {
      since = connection.waiting_since;
      longest = id;
    }
  }
  return longest;
}

void ConnectionLimiter::Close(Id id, std::vector<Id>* to_close) {
  Connection& connection = connections_.at(id);
  connection.closing = true;
  --counted_;
  if (--counted_by_peer_[connection.peer] == 0) counted_by_peer_.erase(connection.peer);
  ++closed_by_limits_;
  if (to_close != nullptr) to_close->push_back(id);
}

}  // namespace cohort
