#ifndef COHORT_SERVICES_MEMBERSHIP_HOST_MEETINGS_H_
#define COHORT_SERVICES_MEMBERSHIP_HOST_MEETINGS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

// The workers of one host meeting at a barrier before one of them, the leader, arrives at the
// scheduler for them all: the scheduler then hears one call a host, not one a worker. A
// meeting's place is an abstract Unix socket (SOCK_SEQPACKET) the leader listens on: it is
// shared by the processes of one network namespace, vanishes with the last descriptor (nothing
// is left behind on the host), and admits only processes of this Unix user. One thread a
// process serves every place it leads or visits; a place is kept open for a whole generation
// (a connection a worker, for each of its barriers) until Close.
//
// A worker that dies leaves the others waiting here as at the scheduler: its membership moves
// on (a new generation, the job's end), and the session closes the place with that news.
class HostMeetings {
 public:
  struct Arrival {
    int rank = 0;  // as registered
    std::string name;
    uint64_t fingerprint = 0;
  };
  // A barrier's result: the fingerprint agreed on, or why it was not passed.
  using Done = std::function<void(absl::StatusOr<uint64_t>)>;
  // The leader's own arrival is due once every other worker came: `forward` gets their
  // arrivals and hands the scheduler's answer to `release`, which answers them all and `done`.
  using Forward = std::function<void(std::vector<Arrival> others, Done release)>;

  static absl::StatusOr<std::unique_ptr<HostMeetings>> Create();
  ~HostMeetings();
  HostMeetings(const HostMeetings&) = delete;
  HostMeetings& operator=(const HostMeetings&) = delete;

  // The leader at `place` (opened at the first call) with `others` workers to wait for.
  // Callbacks run on this object's thread or the caller's; they must not block.
  void Lead(const std::string& place, int others, Done done, Forward forward);
  // Arrives at the leader's place (one not open yet is tried again until it is); `done` gets
  // the leader's release.
  void Join(const std::string& place, Arrival mine, Done done);
  // Every meeting at `place` not yet released, and any later one there, gets `why` (those
  // waiting now on this object's thread: the caller may hold locks their callbacks take).
  void Close(const std::string& place, absl::Status why);

 private:
  struct Leader {
    int listener = -1;
    int others = 0;
    std::map<int, Arrival> arrived;  // by connection
    Done done;                       // the leader's own arrival, while it waits
    Forward forward;
    bool forwarded = false;  // the scheduler is asked; its answer releases `arrived`
  };
  struct Visitor {  // a worker at someone else's place
    int fd = -1;    // -1: not connected yet
    Arrival mine;
    Done done;  // while it waits
  };
  using Callbacks = std::vector<std::function<void()>>;
  // Where a ready descriptor belongs.
  struct Owner {
    enum Kind { kListener, kConnection, kVisitor } kind;
    std::string place;
    int rank = 0;  // kVisitor
  };

  HostMeetings(int epoll, int wake);
  void Loop();
  void Wake();  // the loop, to answer what Close left or to try visitors again
  void Watch(int fd, Owner owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forwards once the leader and every other worker are there.
  void MaybeForward(const std::string& place, Leader& leader, Callbacks& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const std::string& place, const absl::StatusOr<uint64_t>& result);
  // Connects and sends the visitor's arrival, or leaves it for a later try.
  void Visit(const std::string& place, Visitor& visitor, Callbacks& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnReady(int fd, Callbacks& later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int epoll_;
  const int wake_;  // eventfd: stop, or a visitor to try again
  const uid_t uid_;
  std::atomic<bool> stopping_{false};
  std::vector<char> receive_buffer_ ABSL_GUARDED_BY(mu_);  // one message at a time
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Leader> leaders_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, int>, Visitor> visitors_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, Owner> owners_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Status> closed_ ABSL_GUARDED_BY(mu_);
  bool retry_ ABSL_GUARDED_BY(mu_) = false;  // a visitor waits for its place to open
  Callbacks closed_waiters_ ABSL_GUARDED_BY(mu_);  // Close's, for the loop to call
  std::thread thread_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_HOST_MEETINGS_H_
