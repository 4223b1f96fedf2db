// Plays a job's shards and workers against a real scheduler, all in this process, and says how
// its control plane fared: registration, barriers, the idle scheduler's CPU, the end.
//   bazel run //tools/sim:member_sim -- --scheduler=127.0.0.1:9000 --workers=1024 --shards=64
// (the scheduler started with --insecure -n 1024 -s 64).

#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "services/common/addresses.h"
#include "services/common/data_path_tuning.h"
#include "services/common/http_server.h"
#include "services/common/open_files.h"
#include "services/membership/member_session.h"
#include "tools/bench/proc_usage.h"
#include "tools/sim/member_swarm.h"

ABSL_FLAG(std::string, scheduler, "", "the scheduler's host:port (plaintext: --insecure)");
ABSL_FLAG(int, workers, 64, "workers to play");
ABSL_FLAG(int, shards, 1,
          "shards to play (registered only: no data path); 0 with --data_steps, whose shards "
          "are real processes");
ABSL_FLAG(int, threads, 32, "members registering (and leaving) at once");
ABSL_FLAG(int, workers_per_host, 8,
          "workers a simulated host holds: they meet at a barrier there before one arrives "
          "for all (1: every worker a host of its own)");
ABSL_FLAG(int, barriers, 20, "barriers of every worker to time");
ABSL_FLAG(int, scheduler_pid, 0, "the scheduler's pid, to read its CPU time while idle");
ABSL_FLAG(double, idle_s, 5, "seconds the running job stays idle (heartbeats only)");
ABSL_FLAG(int, data_steps, 0,
          "dist_sync steps every worker runs against the job's real shards, counting: every "
          "element must be the step number after each step");
ABSL_FLAG(int, keys, 2, "--data_steps: keys of the model");
ABSL_FLAG(int64_t, elements, 4096, "--data_steps: F32 elements a key");
ABSL_FLAG(std::vector<std::string>, shard_pids, {},
          "--data_steps: the real shards' pids, for their memory per worker stream and their "
          "CPU time per push");
ABSL_FLAG(std::vector<std::string>, shard_metrics, {},
          "--data_steps: the real shards' metrics host:port (plaintext), for the time of an "
          "update (the rank-order sum of every worker's push and the optimizer)");
ABSL_FLAG(std::string, scheduler_http, "",
          "the scheduler's HTTP host:port (plaintext): /status and /metrics are timed while the "
          "job runs idle");
ABSL_FLAG(bool, elastic, false,
          "the scheduler runs an elastic job (--on_worker_failure=elastic, --max_workers one "
          "more than --workers): a worker dies, then one joins, and each generation change is "
          "timed");
ABSL_FLAG(bool, hang, false,
          "with --elastic: a worker in a process of its own joins, then hangs (SIGSTOP) while "
          "the others wait for it at a barrier; the time until the scheduler lets them go on");
ABSL_FLAG(bool, sit, false,
          "join the job as one more worker and wait to be killed (the process --hang stops)");

namespace {

// GET path from host:port (plain HTTP); `flag` names where the address came from.
absl::StatusOr<cohort::HttpResponse> Get(const std::string& address, const std::string& path,
                                         absl::string_view flag) {
  const int port = cohort::PortOfAddress(address);
  if (port <= 0) return absl::InvalidArgumentError(absl::StrCat(flag, " takes host:port"));
  return cohort::HttpGet({std::string(cohort::HostOfAddress(address)), port}, path);
}

// GET path from host:port: the time to the whole answer and its bytes.
absl::StatusOr<std::pair<absl::Duration, size_t>> Fetch(const std::string& address,
                                                         const std::string& path) {
  const absl::Time start = absl::Now();
  absl::StatusOr<cohort::HttpResponse> page = Get(address, path, "--scheduler_http");
  if (!page.ok()) return page.status();
  return std::make_pair(absl::Now() - start, page->body.size());
}

absl::Duration Percentile(std::vector<absl::Duration> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// The sum of a metric's series (any labels) on a page of Prometheus text.
double SeriesSum(absl::string_view page, absl::string_view name) {
  double total = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() == name.size() ||
        (line[name.size()] != ' ' && line[name.size()] != '{')) {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) total += value;
  }
  return total;
}

// The shards' update time so far, summed over them: seconds and updates
// (cohort_shard_optimizer_apply_seconds).
absl::StatusOr<std::pair<double, double>> UpdateTimes(const std::vector<std::string>& shards) {
  std::pair<double, double> total{0, 0};
  for (const std::string& address : shards) {
    absl::StatusOr<cohort::HttpResponse> page = Get(address, "/metrics", "--shard_metrics");
    if (!page.ok()) return page.status();
    total.first += SeriesSum(page->body, "cohort_shard_optimizer_apply_seconds_sum");
    total.second += SeriesSum(page->body, "cohort_shard_optimizer_apply_seconds_count");
  }
  return total;
}

// The scheduler's barrier calls and the workers' arrivals they brought, so far.
absl::StatusOr<std::pair<double, double>> BarrierCounts(const std::string& http) {
  absl::StatusOr<cohort::HttpResponse> page = Get(http, "/metrics", "--scheduler_http");
  if (!page.ok()) return page.status();
  return std::make_pair(SeriesSum(page->body, "cohort_scheduler_barrier_calls_total"),
                        SeriesSum(page->body, "cohort_scheduler_barrier_arrivals_total"));
}

int Fail(const absl::Status& s) {
  std::cerr << "member_sim: error: " << s.message() << "\n";
  return 1;
}

int Sit(const std::string& scheduler) {
  cohort::MemberSessionOptions o;
  o.scheduler_address = scheduler;
  auto session = cohort::MemberSession::Join(o);
  if (!session.ok()) return Fail(session.status());
  for (;;) absl::SleepFor(absl::Hours(1));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Plays a job's members against a real scheduler.");
  absl::ParseCommandLine(argc, argv);
  cohort::RaiseOpenFileLimit();  // a connection per member, as N processes would have
  // As every shard and worker process does: absl's lock-order graph is not a member's cost.
  cohort::SkipMutexDeadlockBookkeeping();
  if (absl::GetFlag(FLAGS_sit)) return Sit(absl::GetFlag(FLAGS_scheduler));
  cohort::sim::SwarmOptions o;
  o.scheduler_address = absl::GetFlag(FLAGS_scheduler);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.shards = absl::GetFlag(FLAGS_shards);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.workers_per_host = absl::GetFlag(FLAGS_workers_per_host);
  const int data_steps = absl::GetFlag(FLAGS_data_steps);
  if (o.scheduler_address.empty() || o.workers < 1 || o.shards < (data_steps > 0 ? 0 : 1)) {
    std::cerr << "member_sim: error: give --scheduler, --workers >= 1 and --shards >= 1 (0 with "
                 "--data_steps)\n";
    return 2;
  }
  const absl::Time start = absl::Now();
  auto swarm = cohort::sim::MemberSwarm::Join(o);
  if (!swarm.ok()) return Fail(swarm.status());
  const absl::Duration registered = absl::Now() - start;
  if (absl::Status s = (*swarm)->WaitUntilRunning(absl::Seconds(60)); !s.ok()) return Fail(s);
  const absl::Duration running = absl::Now() - start;

  const int pid = absl::GetFlag(FLAGS_scheduler_pid);
  const absl::Duration barriers_cpu = pid > 0 ? cohort::ProcessCpuTime(pid) : absl::ZeroDuration();
  const absl::Duration own_cpu = cohort::ProcessCpuTime(getpid());
  const std::string http = absl::GetFlag(FLAGS_scheduler_http);
  std::pair<double, double> counts_before;
  if (!http.empty()) {
    auto counts = BarrierCounts(http);
    if (!counts.ok()) return Fail(counts.status());
    counts_before = *counts;
  }
  auto barriers = (*swarm)->Barriers(absl::GetFlag(FLAGS_barriers));
  if (!barriers.ok()) return Fail(barriers.status());
  std::string calls;  // how many calls the scheduler took for its workers' arrivals
  if (!http.empty()) {
    auto counts = BarrierCounts(http);
    if (!counts.ok()) return Fail(counts.status());
    calls = absl::StrFormat("; the scheduler took %.0f barrier calls a round for %.0f arrivals",
                            (counts->first - counts_before.first) / barriers->size(),
                            (counts->second - counts_before.second) / barriers->size());
  }
  // The scheduler's own share of a barrier, told apart from the simulator's on the same cores
  // (the simulator's: its members' calls and answers, which processes of their own would
  // spread over their hosts).
  const double barrier_cpu_ms =
      pid > 0 ? Ms(cohort::ProcessCpuTime(pid) - barriers_cpu) / barriers->size() : 0;
  const double own_barrier_cpu_ms =
      Ms(cohort::ProcessCpuTime(getpid()) - own_cpu) / barriers->size();

  const absl::Duration idle = absl::Seconds(absl::GetFlag(FLAGS_idle_s));
  const absl::Duration cpu_before = pid > 0 ? cohort::ProcessCpuTime(pid) : absl::ZeroDuration();
  absl::SleepFor(idle);
  const double idle_share =
      pid > 0 && idle > absl::ZeroDuration() ? absl::FDivDuration(cohort::ProcessCpuTime(pid) - cpu_before, idle) : 0;
  const double resident = pid > 0 ? cohort::ProcessResidentBytes(pid) / 1048576.0 : 0;
  std::string pages = calls;
  if (!http.empty()) {
    for (const char* path : {"/status", "/metrics"}) {
      auto fetched = Fetch(http, path);
      if (!fetched.ok()) return Fail(fetched.status());
      absl::StrAppend(&pages, absl::StrFormat("; %s %.0f KiB in %.1f ms", path,
                                              fetched->second / 1024.0,
                                              Ms(fetched->first)));
    }
  }

  std::string data_path;
  if (data_steps > 0) {
    std::vector<int> shard_pids;
    for (const std::string& p : absl::GetFlag(FLAGS_shard_pids)) shard_pids.push_back(std::stoi(p));
    const auto shards_resident = [&] {
      double mib = 0;
      for (int p : shard_pids) mib += cohort::ProcessResidentBytes(p) / 1048576.0;
      return mib;
    };
    const auto shards_cpu = [&] {
      absl::Duration cpu;
      for (int p : shard_pids) cpu += cohort::ProcessCpuTime(p);
      return cpu;
    };
    const std::vector<std::string> metrics = absl::GetFlag(FLAGS_shard_metrics);
    const double resident_before = shards_resident();
    const absl::Duration cpu_before = shards_cpu();
    auto updates_before = UpdateTimes(metrics);
    if (!updates_before.ok()) return Fail(updates_before.status());
    const int keys = absl::GetFlag(FLAGS_keys);
    const int64_t elements = absl::GetFlag(FLAGS_elements);
    auto counted = (*swarm)->CountSteps(data_steps, keys, elements);
    if (!counted.ok()) return Fail(counted.status());
    const double pushes = static_cast<double>(data_steps) * o.workers;
    data_path = absl::StrFormat("; %d dist_sync steps counted right in %.2f s", data_steps,
                                absl::ToDoubleSeconds(counted->took));
    // Fairness: how far apart the workers had their answers, and whether the same ranks
    // always come last.
    std::vector<absl::Duration> late = counted->lateness;
    const size_t tenth = std::max<size_t>(1, late.size() / 10);
    const auto mean_of = [](auto first, auto last) {
      return absl::FDivDuration(std::accumulate(first, last, absl::ZeroDuration()),
                                absl::Milliseconds(1)) / static_cast<double>(last - first);
    };
    absl::StrAppend(&data_path, absl::StrFormat(
        "; a step's answers %.1f ms apart at p50, %.1f ms at p99; the first tenth of the ranks "
        "%.1f ms behind each step's first answer, the last tenth %.1f ms",
        Ms(Percentile(counted->spreads, 0.5)), Ms(Percentile(counted->spreads, 0.99)),
        mean_of(late.begin(), late.begin() + tenth), mean_of(late.end() - tenth, late.end())));
    if (!metrics.empty()) {
      auto updates = UpdateTimes(metrics);
      if (!updates.ok()) return Fail(updates.status());
      const double count = updates->second - updates_before->second;
      const double seconds = updates->first - updates_before->first;
      absl::StrAppend(&data_path, absl::StrFormat(
          "; an update (%d pushes summed in rank order, SGD) %.2f ms, %.2f ns per pushed element",
          o.workers, 1e3 * seconds / count,
          1e9 * seconds / (static_cast<double>(keys) * elements * pushes)));
    }
    if (!shard_pids.empty()) {  // the streams are open and idle now
      const double per_shard = (shards_resident() - resident_before) / shard_pids.size();
      // A dist_sync update keeps every worker's push until the last one came (to sum them in
      // rank order): about the workers times the shard's parameters.
      const double pushes_kept =
          static_cast<double>(o.workers) * keys * elements * 4 / shard_pids.size() / 1048576;
      absl::StrAppend(&data_path, absl::StrFormat(
          "; shards' CPU %.0f us a worker's step; each shard +%.1f MiB with its %d worker "
          "streams, %.1f MiB of it the pushes an update sums: %.0f KiB a stream besides",
          absl::ToDoubleMicroseconds(shards_cpu() - cpu_before) / pushes, per_shard, o.workers,
          pushes_kept, 1024 * (per_shard - pushes_kept) / o.workers));
    }
  }

  std::string changes;
  if (absl::GetFlag(FLAGS_elastic)) {
    auto death = (*swarm)->KillAWorker();
    if (!death.ok()) return Fail(death.status());
    auto join = (*swarm)->JoinAWorker();
    if (!join.ok()) return Fail(join.status());
    changes = absl::StrFormat("; a worker killed: every other one in the next generation %.2f s "
                              "later; one joining: every worker in the next %.2f s later",
                              absl::ToDoubleSeconds(*death), absl::ToDoubleSeconds(*join));
    if (absl::GetFlag(FLAGS_hang)) {
      char self[4096];
      const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
      if (length <= 0) return Fail(absl::InternalError("cannot read /proc/self/exe"));
      auto hang = (*swarm)->HangAWorker({std::string(self, length),
                                         "--scheduler=" + o.scheduler_address, "--sit"});
      if (!hang.ok()) return Fail(hang.status());
      absl::StrAppend(&changes, absl::StrFormat("; a worker hung: the others let go of its "
                                                "barrier %.2f s after it stopped",
                                                absl::ToDoubleSeconds(*hang)));
    }
  }

  const absl::Time leaving = absl::Now();
  if (absl::Status s = (*swarm)->FinishJob(absl::Seconds(60)); !s.ok()) return Fail(s);
  const absl::Duration done = absl::Now() - leaving;

  std::cout << absl::StrFormat(
      "member_sim: %d workers, %d shards: registered in %.2f s, RUNNING at %.2f s; barrier "
      "p50 %.1f ms, p99 %.1f ms (%d rounds, %d workers a host%s); idle scheduler %s%s%s%s; DONE %.2f s after the "
      "workers began to leave\n",
      o.workers, o.shards, absl::ToDoubleSeconds(registered), absl::ToDoubleSeconds(running),
      Ms(Percentile(*barriers, 0.5)), Ms(Percentile(*barriers, 0.99)), barriers->size(),
      o.workers_per_host,
      absl::StrCat(pid > 0 ? absl::StrFormat(", the scheduler's CPU %.1f ms each", barrier_cpu_ms)
                           : std::string(),
                   absl::StrFormat(", the simulator's %.1f ms", own_barrier_cpu_ms)),
      pid <= 0 ? std::string("not measured (--scheduler_pid)")
      : idle > absl::ZeroDuration()
          ? absl::StrFormat("%.1f%% of a core over %.0f s, %.0f MiB resident", 100 * idle_share,
                            absl::ToDoubleSeconds(idle), resident)
          : absl::StrFormat("not measured (--idle_s=0), %.0f MiB resident", resident),
      pages, data_path, changes, absl::ToDoubleSeconds(done));
  return 0;
}
