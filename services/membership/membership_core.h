#ifndef COHORT_SERVICES_MEMBERSHIP_MEMBERSHIP_CORE_H_
#define COHORT_SERVICES_MEMBERSHIP_MEMBERSHIP_CORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/scheduler.pb.h"
#include "services/common/clock.h"

namespace cohort {

// One control stream to the scheduler (the Control call over gRPC, a fake in tests). Read runs
// on one thread while Write, WritesDone and Cancel run on another.
class ControlStream {
 public:
  virtual ~ControlStream() = default;
  // Blocks for the scheduler's next message; false once the stream has ended.
  virtual bool Read(v1::ControlMessage* message) = 0;
  // False once the stream is broken.
  virtual bool Write(const v1::Heartbeat& heartbeat) = 0;
  // Ends this side cleanly; the scheduler then ends its side.
  virtual void WritesDone() = 0;
  // Breaks the stream: a blocked Read returns false.
  virtual void Cancel() = 0;
  // After Read returned false: how the stream ended.
  virtual absl::Status Finish() = 0;
};

struct MembershipTiming {
  absl::Duration heartbeat_interval = absl::Milliseconds(250);
  // Without an answer from the scheduler for this long the member gives up (Contracts,
  // "Failure": it waits this grace period to reconnect, then the job ends for it).
  absl::Duration scheduler_grace = absl::Seconds(3);
  // On leaving, how long to wait for the scheduler to close its side of the stream.
  absl::Duration close_wait = absl::Seconds(2);
};

// A member's heartbeat without gRPC: from a thread of its own it keeps a control stream open
// (reopening it when it breaks), sends a heartbeat every interval with the latest progress,
// and learns there when the job ends. The end (DONE, FAILED with the scheduler's reason, or the
// scheduler lost: no answer within the grace period, reconnecting included) is reported once
// to the listeners, from the heartbeat or reading thread. Time comes from the clock. Thread-safe.
class MembershipCore {
 public:
  using StreamOpener = std::function<std::unique_ptr<ControlStream>()>;
  // Registers the member again under its rank, before a broken control stream is reopened: a
  // scheduler restarted at the same address knows nobody (an error is one more failed try).
  using Rejoiner = std::function<absl::Status()>;

  // name: "worker 1", how messages name the member; scheduler: its address, for messages.
  MembershipCore(std::string name, v1::Role role, int rank, std::string scheduler,
                 MembershipTiming timing, StreamOpener open_stream, Clock* clock,
                 Rejoiner rejoin = nullptr);
  ~MembershipCore();  // stops the heartbeat

  // Starts the heartbeat thread (once).
  void Start();
  // Stops the heartbeat (closing the stream cleanly) and waits for its threads. Idempotent.
  void Stop();

  // Sent with the following heartbeats.
  void SetProgress(const v1::Progress& progress);
  void SetCopiesHeld(std::vector<int> shares);

  // Calls f once when the job ends (at once if it already has); f must not block. Returns an
  // id for RemoveEndListener, after which the listener is not running and is never called.
  int OnEnd(std::function<void()> f);
  // Calls f with the generation each time a control message says the membership generation
  // moved on; f must not block. Removed with RemoveEndListener.
  int OnGenerationChange(std::function<void(int64_t)> f);
  void RemoveEndListener(int id);
  // The latest membership generation a control message carried.
  int64_t generation() const;
  // OK while running and after DONE; Aborted with the reason after FAILED; Unavailable after
  // the scheduler was lost.
  absl::Status end_status() const;
  bool ended() const;
  // Blocks until the job has ended and every end listener has run; false after timeout.
  bool WaitUntilEnded(absl::Duration timeout);

 private:
  void HeartbeatLoop();
  // One control stream's life: heartbeats until it breaks, the job ends or we stop. Returns
  // why it broke ("" when it did not).
  std::string RunControlStream();
  void End(v1::JobState state, const std::string& reason);
  // A control message said generation: the listeners hear of it if it is new.
  void SawGeneration(int64_t generation);

  const std::string name_;
  const v1::Role role_;
  const int rank_;
  const std::string scheduler_;
  const MembershipTiming timing_;
  const StreamOpener open_stream_;
  Clock* const clock_;
  const Rejoiner rejoin_;

  // Held while listeners run, so that one removed is not running any more.
  absl::Mutex listeners_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::vector<std::pair<int, std::function<void()>>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  std::vector<std::pair<int, std::function<void(int64_t)>>> generation_listeners_
      ABSL_GUARDED_BY(listeners_mu_);
  int next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 0;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool listeners_ran_ ABSL_GUARDED_BY(mu_) = false;  // after ended_: the end listeners are done
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_answer_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::Progress> progress_ ABSL_GUARDED_BY(mu_);
  std::vector<int> copies_held_ ABSL_GUARDED_BY(mu_);
  std::thread heartbeat_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_MEMBERSHIP_CORE_H_
