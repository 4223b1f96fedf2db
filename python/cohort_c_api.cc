// libcohort: Cohort's kvstore behind a C interface, the C++ side of the `cohort` package
// (cohort/_cohort.py loads it with ctypes). A plain C interface needs no Python headers, so one
// build serves every CPython 3 (Debian's 3.11, a GPU image's 3.12, a venv's). Arrays come as
// float32 memory with their dimensions, read or written in place; the Python side checks
// dtypes and layouts and holds each array's buffer while the kvstore uses it. A function that
// fails returns false, and cohort_error() says why (per thread, until that thread's next call).

#include <cstdint>
#include <cstdlib>  // on_exit
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/addresses.h"
#include "services/wire/wire_encoding.h"
#include "services/worker/job_kvstore.h"
#include "services/worker/worker_process.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/loop/training.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer_spec.h"
#include "trainer/tensor/tensor.h"

namespace cohort {
namespace {

// A worker's membership lasts until its process exits, and its exit status is its verdict:
// only status 0 finishes it; any other (an exception that reached the top, sys.exit(n)) fails
// the job with the status and the exception's last line. Every worker joined is held here from
// the start, whenever Python lets its store go. A process killed outside Python's control (a
// signal, os._exit) says nothing: the scheduler finds it dead.
class ExitVerdict {
 public:
  static void Hold(std::shared_ptr<WorkerProcess> worker) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!registered_) {
      on_exit(&ExitVerdict::OnExit, nullptr);
      registered_ = true;
    }
    held_.push_back(std::move(worker));
  }
  // What failed, said with a status other than 0 (the exception's last line).
  static void SetReason(std::string reason) {
    std::lock_guard<std::mutex> lock(mu_);
    reason_ = std::move(reason);
  }

 private:
  static void OnExit(int status, void*) {
    std::vector<std::shared_ptr<WorkerProcess>> held;
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
      reason = reason_;
    }
    const absl::Status verdict =
        status == 0 ? absl::OkStatus()
                    : absl::AbortedError(absl::StrCat("the program exited with status ", status,
                                                      reason.empty() ? "" : ": ", reason));
    for (std::shared_ptr<WorkerProcess>& worker : held) worker->member()->Leave(verdict);
  }

  static inline std::mutex mu_;
  static inline bool registered_ = false;
  static inline std::vector<std::shared_ptr<WorkerProcess>> held_;
  static inline std::string reason_;
};

thread_local std::string last_error;

// Keeps a failure's words for cohort_error(); true when status is OK.
bool Said(const absl::Status& status) {
  if (status.ok()) return true;
  last_error = std::string(status.message());
  return false;
}

Tensor Borrow(const float* data, const int64_t* dims, int ndim) {
  return Tensor::Borrow(const_cast<float*>(data), Shape(std::vector<int64_t>(dims, dims + ndim)),
                        DType::kF32);
}

}  // namespace

// A kvstore for Python: one call at a time (the C++ store expects one thread at a time); the
// caller (ctypes) has let the GIL go.
struct Store {
  Store(std::shared_ptr<WorkerProcess> worker, std::unique_ptr<KVStore> kvstore,
        std::string compression)
      : worker(std::move(worker)), type(kvstore->type()), compression(std::move(compression)),
        store(std::move(kvstore)) {
    if (this->worker != nullptr) ExitVerdict::Hold(this->worker);
  }

  // Runs one call of the store; keeps its failure for Recover.
  template <typename F>
  bool Call(F call) {
    absl::MutexLock lock(&mu);
    absl::Status status = call();
    if (!status.ok()) last_failure = status;
    return Said(status);
  }

  const std::shared_ptr<WorkerProcess> worker;  // null for "local"
  const std::string type;
  const std::string compression;  // how pushes go on the wire (GradientCompressionName)
  absl::Mutex mu;
  absl::Status last_failure ABSL_GUARDED_BY(mu);
  const std::unique_ptr<KVStore> store;  // called under mu, but for its thread-safe calls
};

// A list of byte strings handed to the caller (an exchange's payloads, the workers' hosts).
struct Strings {
  std::vector<std::string> items;
};

}  // namespace cohort

using cohort::Store;
using cohort::Strings;

extern "C" {

__attribute__((visibility("default"))) const char* cohort_error() {
  return cohort::last_error.c_str();
}

// "local", or a distributed store of the job in the COHORT_* variables, with the worker's
// membership and metrics (as the worker binary's: /metrics, the status page's progress).
__attribute__((visibility("default"))) bool cohort_create(const char* type, Store** out) {
  using namespace cohort;
  if (std::string(type) == "local") {
    absl::StatusOr<std::unique_ptr<KVStore>> store = CreateKVStore(type);
    if (!Said(store.status())) return false;
    *out = new Store(nullptr, *std::move(store), "none");
    return true;
  }
  absl::StatusOr<JobOptions> job = JobOptionsFromEnvironment();
  if (!Said(job.status())) return false;
  absl::StatusOr<std::unique_ptr<WorkerProcess>> worker =
      WorkerProcess::Join(*job, /*threads=*/0);
  if (!Said(worker.status())) return false;
  absl::StatusOr<std::unique_ptr<KVStore>> store =
      CreateDistKVStore(type, (*worker)->member(), *job);
  if (!store.ok()) (*worker)->member()->Leave(store.status());
  if (!Said(store.status())) return false;
  *out = new Store(*std::move(worker), *std::move(store),
                   GradientCompressionName(job->compression));
  return true;
}

// The store ends; the worker says how the program ended when the process exits.
__attribute__((visibility("default"))) void cohort_free(Store* s) { delete s; }

__attribute__((visibility("default"))) const char* cohort_type(Store* s) {
  return s->type.c_str();
}

__attribute__((visibility("default"))) const char* cohort_gradient_compression(Store* s) {
  return s->compression.c_str();
}

// rank, num_workers and WorkersChanged are the store's thread-safe calls: they do not wait for
// a call in flight (which holds mu while it waits).
__attribute__((visibility("default"))) int cohort_rank(Store* s) { return s->store->rank(); }

__attribute__((visibility("default"))) int cohort_num_workers(Store* s) {
  return s->store->num_workers();
}

__attribute__((visibility("default"))) bool cohort_set_optimizer(
    Store* s, const char* optimizer, double lr, double momentum, double wd,
    const char* lr_schedule, int64_t epochs, int64_t steps_per_epoch, double warmup_epochs,
    double beta1, double beta2, double eps) {
  using namespace cohort;
  absl::StatusOr<LrScheduleKind> kind = ParseLrScheduleKind(lr_schedule);
  if (!Said(kind.status())) return false;
  OptimizerSpec spec;
  spec.optimizer = optimizer;
  spec.optimizer_options = {momentum, wd, beta1, beta2, eps};
  spec.lr_schedule.kind = *kind;
  spec.lr_schedule.base_lr = lr;
  spec.lr_schedule.epochs = epochs;
  spec.lr_schedule.steps_per_epoch = steps_per_epoch;
  spec.lr_schedule.warmup_epochs = warmup_epochs;
  return s->Call([&] { return s->store->SetOptimizer(spec); });
}

// lr < 0: the schedule's rate again.
__attribute__((visibility("default"))) bool cohort_set_learning_rate(Store* s, double lr) {
  return s->Call([&] { return s->store->SetLearningRate(static_cast<float>(lr)); });
}

// value: float32[dims] (read).
__attribute__((visibility("default"))) bool cohort_init(Store* s, int64_t key, const float* value,
                                                        const int64_t* dims, int ndim,
                                                        bool auxiliary) {
  const cohort::Tensor v = cohort::Borrow(value, dims, ndim);
  return s->Call([&] {
    return auxiliary ? s->store->InitAuxiliary(key, v) : s->store->Init(key, v);
  });
}

// grad: float32[dims] (read; free again on return).
__attribute__((visibility("default"))) bool cohort_push(Store* s, int64_t key, const float* grad,
                                                        const int64_t* dims, int ndim) {
  const cohort::Tensor g = cohort::Borrow(grad, dims, ndim);
  return s->Call([&] { return s->store->Push(key, g); });
}

// out: float32[dims] (written).
__attribute__((visibility("default"))) bool cohort_pull(Store* s, int64_t key, float* out,
                                                        const int64_t* dims, int ndim) {
  cohort::Tensor o = cohort::Borrow(out, dims, ndim);
  return s->Call([&] { return s->store->Pull(key, &o); });
}

// Starts key's push of grad (float32[grad_dims]) and pull into out (float32[out_dims]); the
// caller keeps both until cohort_wait(key) returns.
__attribute__((visibility("default"))) bool cohort_pushpull(Store* s, int64_t key,
                                                            const float* grad,
                                                            const int64_t* grad_dims,
                                                            int grad_ndim, float* out,
                                                            const int64_t* out_dims,
                                                            int out_ndim) {
  const cohort::Tensor g = cohort::Borrow(grad, grad_dims, grad_ndim);
  cohort::Tensor o = cohort::Borrow(out, out_dims, out_ndim);
  return s->Call([&] { return s->store->PushPull(key, g, &o); });
}

__attribute__((visibility("default"))) bool cohort_wait(Store* s, int64_t key) {
  return s->Call([&] { return s->store->Wait(key); });
}

// After a call failed: the store recovers from its failure (KVStoreRecovery::Recover: a shard
// came back, an elastic job's workers changed), or fails again; with no failure since the last
// recovery, it joins the job's current generation (KVStoreRecovery::CatchUp). Every worker of
// the generation calls it at once; then the caller pulls every key and goes on from
// cohort_start_step(). A store without recovery (the local one) only fails again.
__attribute__((visibility("default"))) bool cohort_recover(Store* s) {
  return s->Call([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
    const absl::Status failure = std::exchange(s->last_failure, absl::OkStatus());
    cohort::KVStoreRecovery* recovery = s->store->recovery();
    if (recovery == nullptr) return failure;
    return failure.ok() ? recovery->CatchUp() : recovery->Recover(failure);
  });
}

// Whether the job's workers changed since the store's generation (its next call fails).
__attribute__((visibility("default"))) bool cohort_workers_changed(Store* s) {
  const cohort::KVStoreRecovery* recovery = s->store->recovery();
  return recovery != nullptr && recovery->WorkersChanged();
}

// Whether a call failed since the last recovery.
__attribute__((visibility("default"))) bool cohort_failed(Store* s) {
  absl::MutexLock lock(&s->mu);
  return !s->last_failure.ok();
}

// *rank and *hosts: the host every worker of the job's current generation registered from, by
// rank, and this worker's rank there.
__attribute__((visibility("default"))) bool cohort_worker_hosts(Store* s, int* rank,
                                                                Strings** hosts) {
  if (s->worker == nullptr) {
    *rank = 0;
    *hosts = new Strings{{cohort::HostName()}};
    return true;
  }
  absl::StatusOr<cohort::ShardsView> view =
      s->worker->member()->WaitForShards(absl::InfiniteDuration());
  if (!cohort::Said(view.status())) return false;
  *rank = view->rank;
  *hosts = new Strings{view->worker_hosts};
  return true;
}

__attribute__((visibility("default"))) bool cohort_barrier(Store* s) {
  return s->Call([&] { return s->store->Barrier(); });
}

// *all: what every worker brought (payload's bytes), by rank, once every one has called it.
__attribute__((visibility("default"))) bool cohort_exchange(Store* s, const char* payload,
                                                            size_t size, Strings** all) {
  absl::StatusOr<std::vector<std::string>> gathered;
  if (!s->Call([&] {
        gathered = s->store->Exchange(std::string(payload, size));
        return gathered.status();
      })) {
    return false;
  }
  *all = new Strings{*std::move(gathered)};
  return true;
}

__attribute__((visibility("default"))) size_t cohort_strings_size(const Strings* strings) {
  return strings->items.size();
}

// The i-th string's bytes, *size of them.
__attribute__((visibility("default"))) const char* cohort_strings_at(const Strings* strings,
                                                                     size_t i, size_t* size) {
  *size = strings->items[i].size();
  return strings->items[i].data();
}

__attribute__((visibility("default"))) void cohort_strings_free(Strings* strings) {
  delete strings;
}

// One training step for the worker's metrics (cohort_worker_*, the dashboards' images/sec
// and Comm%) and the scheduler's status page; nothing for the local store.
__attribute__((visibility("default"))) void cohort_record_step(Store* s, int64_t step,
                                                               int64_t epoch, int64_t images,
                                                               double step_seconds,
                                                               double comm_seconds, double loss,
                                                               double lr) {
  if (s->worker == nullptr) return;
  cohort::StepReport report;
  report.step = step;
  report.epoch = epoch;
  report.images = images;
  report.lr = lr;
  report.step_seconds = step_seconds;
  report.step_result.loss = loss;
  report.step_result.pull_seconds = comm_seconds;
  s->worker->metrics()->StepDone(report);
}

// Where /metrics is served; -1 for the local store.
__attribute__((visibility("default"))) int cohort_metrics_port(Store* s) {
  return s->worker == nullptr ? -1 : s->worker->metrics_port();
}

__attribute__((visibility("default"))) bool cohort_start_step(Store* s, int64_t* step) {
  absl::StatusOr<int64_t> start;
  if (!s->Call([&] {
        cohort::KVStoreRecovery* recovery = s->store->recovery();
        start = recovery != nullptr ? recovery->StartStep() : 0;
        return start.status();
      })) {
    return false;
  }
  *step = *start;
  return true;
}

// The exception ending the program (its last line), said with its exit status.
__attribute__((visibility("default"))) void cohort_set_exit_reason(const char* reason) {
  cohort::ExitVerdict::SetReason(reason);
}

}  // extern "C"
