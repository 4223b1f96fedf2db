#include "tools/sim/member_swarm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "services/membership/job_membership.h"
#include "services/worker/job_kvstore.h"
#include "tools/launch/child_process.h"
#include "trainer/base/status_macros.h"

namespace cohort::sim {

absl::Status MemberSwarm::ForEach(int n, int threads,
                                  const std::function<absl::Status(int)>& f) const {
  std::atomic<int> next{0};
  absl::Mutex mu;
  absl::Status first;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min(n, threads); ++t) {
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        const absl::Status s = f(i);
        if (s.ok()) continue;
        absl::MutexLock lock(&mu);
        if (first.ok()) first = s;
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return first;
}

MemberSessionOptions MemberSwarm::WorkerOptions(int index) const {
  MemberSessionOptions o;
  o.scheduler_address = options_.scheduler_address;
  o.role = v1::WORKER;
  o.security = options_.security;
  o.host_meetings = meetings_;
  o.host_key = absl::StrCat("simulated host ", index / std::max(1, options_.workers_per_host));
  return o;
}

absl::StatusOr<std::unique_ptr<MemberSwarm>> MemberSwarm::Join(const SwarmOptions& options) {
  ASSIGN_OR_RETURN(std::shared_ptr<HostMeetings> meetings, HostMeetings::Create());
  std::unique_ptr<MemberSwarm> swarm(new MemberSwarm(options, std::move(meetings)));
  for (auto [role, count, members] :
       {std::tuple{v1::SHARD, options.shards, &swarm->shards_},
        std::tuple{v1::WORKER, options.workers, &swarm->workers_}}) {
    members->resize(count);
    RETURN_IF_ERROR(swarm->ForEach(count, options.threads, [&, role = role,
                                                            members = members](int rank) {
      MemberSessionOptions o;
      if (role == v1::WORKER) o = swarm->WorkerOptions(rank);
      o.scheduler_address = options.scheduler_address;
      o.role = role;
      o.requested_rank = rank;
      o.security = options.security;
      if (role == v1::SHARD) {
        o.port = 1;  // never dialled
        o.advertise_address = "127.0.0.1";
      }
      ASSIGN_OR_RETURN((*members)[rank], MemberSession::Join(o));
      return absl::OkStatus();
    }));
  }
  return swarm;
}

MemberSwarm::~MemberSwarm() {
  stores_.clear();
  const auto leave = [](std::vector<std::unique_ptr<MemberSession>>& members) {
    for (auto& m : members) {
      if (m != nullptr) m->Leave(absl::CancelledError("the simulation stopped"), absl::Seconds(1));
    }
  };
  leave(workers_);
  leave(shards_);
}

absl::Status MemberSwarm::WaitUntilRunning(absl::Duration timeout) {
  return ForEach(static_cast<int>(workers_.size()), options_.threads, [&](int rank) {
    return workers_[rank]->WaitForShards(timeout).status();
  });
}

absl::StatusOr<MemberSwarm::BarrierRound> MemberSwarm::BarrierOfAll(
    const std::string& name) const {
  // Shared with the callbacks, which may outlive a wait that timed out. Each answer has a slot
  // of its own and only the last one takes the lock: N processes' answers share nothing, and
  // the simulator's own bookkeeping must not queue them on one lock.
  struct Answers {
    explicit Answers(int n) : answers(n, absl::NotFoundError("vanished")), times(n) {}
    std::vector<absl::StatusOr<uint64_t>> answers;
    std::vector<absl::Time> times;
    std::atomic<int> pending{0};
    absl::Notification all_in;
  };
  const int n = static_cast<int>(workers_.size());
  auto answers = std::make_shared<Answers>(n);
  // One more than the calls until they are all made: none can be the last before then.
  answers->pending = 1 + static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return w != nullptr; }));
  const auto count_in = [](Answers& a) {
    if (a.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) a.all_in.Notify();
  };
  for (int w = 0; w < n; ++w) {
    if (workers_[w] == nullptr) continue;
    workers_[w]->BarrierAsync(name, 0, workers_[w]->generation(),
                              [answers, w, count_in](absl::StatusOr<uint64_t> answer) {
                                answers->answers[w] = std::move(answer);
                                answers->times[w] = absl::Now();
                                count_in(*answers);
                              });
  }
  BarrierRound round;
  round.last_call = absl::Now();
  count_in(*answers);
  if (!answers->all_in.WaitForNotificationWithTimeout(absl::Seconds(60))) {
    return absl::DeadlineExceededError(absl::StrCat(
        answers->pending.load(), " of ", n, " workers had no answer to barrier '", name,
        "' within 60 s"));
  }
  round.last_answer = round.last_call;
  for (int w = 0; w < n; ++w) {
    if (workers_[w] != nullptr) round.last_answer = std::max(round.last_answer, answers->times[w]);
  }
  round.answers = std::move(answers->answers);
  return round;
}

absl::StatusOr<std::vector<absl::Duration>> MemberSwarm::Barriers(int rounds) {
  std::vector<absl::Duration> latencies;
  for (int r = 0; r < rounds; ++r) {
    ASSIGN_OR_RETURN(BarrierRound round, BarrierOfAll(absl::StrCat("simulated barrier ", r)));
    for (const absl::StatusOr<uint64_t>& answer : round.answers) RETURN_IF_ERROR(answer.status());
    latencies.push_back(round.last_answer - round.last_call);
  }
  return latencies;
}

absl::StatusOr<absl::Duration> MemberSwarm::WaitPastGeneration(int64_t generation,
                                                                absl::Time since) const {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (const auto& w : workers_) {
    while (w != nullptr && w->generation() <= generation) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            w->name(), " did not hear of a generation past ", generation, " within 30 s"));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  return absl::Now() - since;
}

absl::StatusOr<absl::Duration> MemberSwarm::KillAWorker() {
  const int64_t generation = workers_.front()->generation();
  const absl::Time killed = absl::Now();
  if (stores_.size() == workers_.size()) stores_.back().reset();  // it holds the session
  workers_.back()->Vanish();
  workers_.back().reset();
  return WaitPastGeneration(generation, killed);
}

absl::StatusOr<absl::Duration> MemberSwarm::JoinAWorker() {
  const int64_t generation = workers_.front()->generation();
  const MemberSessionOptions o = WorkerOptions(static_cast<int>(workers_.size()));
  const absl::Time joining = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<MemberSession> joined, MemberSession::Join(o));
  workers_.push_back(std::move(joined));
  return WaitPastGeneration(generation, joining);
}

absl::StatusOr<absl::Duration> MemberSwarm::HangAWorker(const std::vector<std::string>& argv) {
  const int64_t generation = workers_.front()->generation();
  launch::SpawnOptions spawn;
  spawn.path = argv.front();
  spawn.argv = argv;
  for (char** e = environ; *e != nullptr; ++e) spawn.env.push_back(*e);
  // Killed and waited for when it goes out of scope, on every path.
  ASSIGN_OR_RETURN(std::unique_ptr<launch::ChildProcess> hung, launch::ChildProcess::Spawn(spawn));
  const pid_t pid = hung->pid();
  RETURN_IF_ERROR(WaitPastGeneration(generation, absl::Now()).status());  // it joined
  if (kill(pid, SIGSTOP) != 0) {
    return absl::InternalError(absl::StrCat("cannot stop pid ", pid, ": ", strerror(errno)));
  }
  const absl::Time stopped = absl::Now();
  ASSIGN_OR_RETURN(BarrierRound round, BarrierOfAll("waiting for a hung worker"));
  for (size_t w = 0; w < round.answers.size(); ++w) {
    if (workers_[w] != nullptr && !ChangedGeneration(round.answers[w].status()).has_value()) {
      return absl::InternalError(absl::StrCat(
          "worker ", w, " was let through the barrier with a hung worker in it: ",
          round.answers[w].status().ToString()));
    }
  }
  return round.last_answer - stopped;
}

absl::StatusOr<MemberSwarm::CountedSteps> MemberSwarm::CountSteps(int steps, int keys,
                                                                  int64_t elements) {
  OptimizerSpec rule;  // plain SGD at rate 1: each step adds the mean push's -(-1)
  rule.optimizer = "sgd";
  rule.lr_schedule.kind = LrScheduleKind::kConstant;
  rule.lr_schedule.base_lr = 1;
  rule.lr_schedule.epochs = 1;
  rule.lr_schedule.steps_per_epoch = steps;
  JobOptions job;
  job.scheduler_address = options_.scheduler_address;
  job.shared_memory = false;  // gRPC streams, as workers on other hosts use
  job.security = options_.security;
  const int n = static_cast<int>(workers_.size());
  stores_.resize(n);
  std::vector<std::vector<absl::Time>> answered(n, std::vector<absl::Time>(steps));
  const absl::Time start = absl::Now();
  // One thread a worker: a store is used from one thread, and the workers meet at its barriers.
  RETURN_IF_ERROR(ForEach(n, n, [&](int w) -> absl::Status {
    ASSIGN_OR_RETURN(stores_[w], CreateDistKVStore("dist_sync", workers_[w].get(), job));
    KVStore& kv = *stores_[w];
    RETURN_IF_ERROR(kv.SetOptimizer(rule));
    std::vector<Tensor> values;
    Tensor grad(Shape{elements});
    for (float& g : grad.span<float>()) g = -1;
    for (int k = 0; k < keys; ++k) {
      values.emplace_back(Shape{elements});
      values.back().SetZero();
      RETURN_IF_ERROR(kv.Init(k, values.back()));
    }
    for (int step = 0; step < steps; ++step) {
      for (int k = 0; k < keys; ++k) RETURN_IF_ERROR(kv.PushPull(k, grad, &values[k]));
      for (int k = 0; k < keys; ++k) {
        RETURN_IF_ERROR(kv.Wait(k));
        const absl::Span<const float> v = values[k].span<float>();
        for (size_t i = 0; i < v.size(); ++i) {
          if (v[i] != static_cast<float>(step + 1)) {
            return absl::InternalError(absl::StrCat("worker ", w, " step ", step, ": key ", k,
                                                    " element ", i, " is ", v[i], ", not ",
                                                    step + 1, ": an update was lost or doubled"));
          }
        }
      }
      answered[w][step] = absl::Now();
    }
    return absl::OkStatus();
  }));
  CountedSteps counted{absl::Now() - start, {}, std::vector<absl::Duration>(n)};
  for (int step = 0; step < steps; ++step) {
    absl::Time first = absl::InfiniteFuture(), last = absl::InfinitePast();
    for (int w = 0; w < n; ++w) {
      first = std::min(first, answered[w][step]);
      last = std::max(last, answered[w][step]);
    }
    counted.spreads.push_back(last - first);
    for (int w = 0; w < n; ++w) counted.lateness[w] += (answered[w][step] - first) / steps;
  }
  return counted;
}

absl::Status MemberSwarm::FinishJob(absl::Duration timeout) {
  stores_.clear();  // their streams close before the workers leave
  RETURN_IF_ERROR(ForEach(static_cast<int>(workers_.size()), options_.threads, [&](int rank) {
    if (workers_[rank] != nullptr) workers_[rank]->Leave(absl::OkStatus());
    return absl::OkStatus();
  }));
  return ForEach(static_cast<int>(shards_.size()), options_.threads, [&](int rank) {
    MemberSession& shard = *shards_[rank];
    if (!shard.WaitUntilEnded(timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("shard ", rank, " did not hear the job end within ",
                       absl::FormatDuration(timeout)));
    }
    const absl::Status end = shard.end_status();
    shard.Leave(absl::OkStatus());
    return end;
  });
}

}  // namespace cohort::sim
