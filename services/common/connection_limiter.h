#ifndef COHORT_SERVICES_COMMON_CONNECTION_LIMITER_H_
#define COHORT_SERVICES_COMMON_CONNECTION_LIMITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace cohort {

// What a port allows before it closes connections (docs/security.md, "HTTP ports", "gRPC
// ports"). A gRPC port counts only the connections waiting for their first byte.
struct ConnectionLimits {
  int max_connections = 512;          // open at once, all peers together
  int max_connections_per_peer = 32;  // open at once from one address
  // How long a connection may take to send a whole request head (HTTP: from connecting, the TLS
  // handshake included, or from its last answer), or its first byte (gRPC).
  absl::Duration request_deadline = absl::Seconds(5);
  // A connection younger than this is not closed for its peer's count: a host's members all
  // connecting at once (a thousand workers' streams to a shard) wait a moment for their first
  // byte without holding the port. The count of all peers holds regardless.
  absl::Duration peer_grace = absl::ZeroDuration();
};

// Which connections a server closes so that idle and slow (slowloris) clients cannot
// crowd out the ones that ask: a connection past its request deadline, and, when a new one
// takes a peer past max_connections_per_peer or all past max_connections, the one of that peer
// (of all) that has waited longest for its request. A connection whose request is being
// answered is never chosen. Not thread-safe: the server holds a lock around every call.
class ConnectionLimiter {
 public:
  using Id = const void*;

  explicit ConnectionLimiter(ConnectionLimits limits) : limits_(limits) {}

  // A connection from peer (its address, no port) opened at `now`: the ids to close, each
  // returned once (the caller closes them and later calls Closed for each).
  std::vector<Id> Opened(Id id, const std::string& peer, absl::Time now);
  void Asked(Id id);                     // its request head arrived
  void Answered(Id id, absl::Time now);  // the answer was sent; it waits for the next request
  void Closed(Id id);

  int open() const { return static_cast<int>(connections_.size()); }
  int64_t closed_by_limits() const { return closed_by_limits_; }

 private:
  struct Connection {
    std::string peer;
    absl::Time waiting_since;
    bool asking = false;   // a request is being answered
    bool closing = false;  // chosen to close; no longer counted
  };
  // The connection but `except` (of `peer`, or of all when null) waiting longest for a
  // request, since `since` at the latest; null when none does.
  Id LongestWaiting(const std::string* peer, Id except, absl::Time since) const;
  void Close(Id id, std::vector<Id>* to_close);

  const ConnectionLimits limits_;
  absl::flat_hash_map<Id, Connection> connections_;
  absl::flat_hash_map<std::string, int> counted_by_peer_;  // not closing
  int counted_ = 0;
  int64_t closed_by_limits_ = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_CONNECTION_LIMITER_H_
