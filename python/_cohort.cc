// _cohort: the Python binding of Cohort's kvstore (pybind11), the C++ side of the `cohort`
// package. Arrays go in and out without copies: anything with the buffer protocol (numpy
// arrays; the package hands torch tensors over as numpy views of their memory) that is
// C-contiguous float32 is read or written in place. The GIL is released while a call waits, and
// every error raises cohort.Error with the C++ message.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "services/common/addresses.h"
#include "services/wire/wire_encoding.h"
#include "services/worker/dist_kvstore.h"
#include "services/worker/worker_process.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/loop/training.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer_spec.h"
#include "trainer/tensor/tensor.h"

namespace py = pybind11;

namespace cohort {
namespace {

// A Python worker's membership lasts until its process exits, and its exit status is its
// verdict: only status 0 finishes it; any other (an exception that reached the top, sys.exit(n))
// fails the job with the status and the exception's last line. Every worker joined is held here
// from the start, whenever Python lets its store go. A process killed outside Python's control
// (a signal, os._exit) says nothing: the scheduler finds it dead.
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

// cohort.Error, a RuntimeError: what every failed call raises.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void Check(const absl::Status& status) {
  if (!status.ok()) throw Error(std::string(status.message()));
}

template <typename T>
T Check(absl::StatusOr<T> value) {
  Check(value.status());
  return *std::move(value);
}

// An array's memory seen as a tensor, with the buffer view that keeps the array (and its
// memory, in place) for as long as it is held.
struct BorrowedArray {
  py::buffer_info buffer;
  Tensor tensor;
};

// `array` (`what` of key, for messages) as a float32 tensor over its own memory; writable when
// the kvstore writes into it.
std::unique_ptr<BorrowedArray> Borrow(const py::object& array, bool writable, int64_t key,
                                      const char* what) {
  if (!py::isinstance<py::buffer>(array)) {
    throw Error(absl::StrCat("key ", key, ": ", what, " is a ",
                             std::string(py::str(array.get_type().attr("__name__"))),
                             ", not an array: give a numpy array or a CPU torch tensor"));
  }
  auto borrowed = std::make_unique<BorrowedArray>();
  try {
    borrowed->buffer = py::reinterpret_borrow<py::buffer>(array).request(writable);
  } catch (const py::error_already_set& e) {
    throw Error(absl::StrCat("key ", key, ": ", what, " is not ",
                             writable ? "a writable array: " : "an array: ", e.what()));
  }
  const py::buffer_info& b = borrowed->buffer;
  if (b.format != py::format_descriptor<float>::format() || b.itemsize != sizeof(float)) {
    const std::string dtype = py::hasattr(array, "dtype")
                                  ? std::string(py::str(array.attr("dtype")))
                                  : absl::StrCat("format '", b.format, "'");
    throw Error(absl::StrCat("key ", key, ": ", what, " holds ", dtype,
                             "; the kvstore holds float32 (np.float32, torch.float32)"));
  }
  std::vector<int64_t> dims(b.shape.begin(), b.shape.end());
  int64_t expected = sizeof(float);
  for (int i = b.ndim - 1; i >= 0; --i) {
    if (b.shape[i] > 1 && b.strides[i] != expected) {
      throw Error(absl::StrCat("key ", key, ": ", what, " of shape (", absl::StrJoin(dims, ", "),
                               ") is not C-contiguous (strides ",
                               absl::StrJoin(b.strides, ", "),
                               "): pass np.ascontiguousarray(x) or x.contiguous()"));
    }
    expected *= b.shape[i];
  }
  borrowed->tensor = Tensor::Borrow(b.ptr, Shape(dims), DType::kF32);
  return borrowed;
}

// A kvstore for Python. Calls from several Python threads take turns (the C++ store expects one
// thread at a time); each waits without the GIL.
class PyKVStore {
 public:
  // worker: the job membership and metrics of a distributed store (null for "local");
  // compression: how its pushes go on the wire (GradientCompressionName).
  PyKVStore(std::shared_ptr<WorkerProcess> worker, std::unique_ptr<KVStore> store,
            std::string compression = "none")
      : worker_(std::move(worker)), store_(std::move(store)),
        compression_(std::move(compression)) {
    if (worker_ != nullptr) ExitVerdict::Hold(worker_);
  }
  // The store ends; the worker says how the program ended when the process exits
  // (ExitVerdict).
  ~PyKVStore() {
    py::gil_scoped_release release;
    store_.reset();
  }

  std::string type() const { return std::string(store_->type()); }
  const std::string& gradient_compression() const { return compression_; }
  int rank() const { return store_->rank(); }
  int num_workers() const { return store_->num_workers(); }

  void SetOptimizer(const std::string& optimizer, double lr, double momentum, double wd,
                    const std::string& lr_schedule, int64_t epochs, int64_t steps_per_epoch,
                    double warmup_epochs, double beta1, double beta2, double eps) {
    OptimizerSpec spec;
    spec.optimizer = optimizer;
    spec.optimizer_options = {momentum, wd, beta1, beta2, eps};
    spec.lr_schedule.kind = Check(ParseLrScheduleKind(lr_schedule));
    spec.lr_schedule.base_lr = lr;
    spec.lr_schedule.epochs = epochs;
    spec.lr_schedule.steps_per_epoch = steps_per_epoch;
    spec.lr_schedule.warmup_epochs = warmup_epochs;
    Call([&] { return store_->SetOptimizer(spec); });
  }

  void SetLearningRate(double lr) {
    Call([&] { return store_->SetLearningRate(static_cast<float>(lr)); });
  }

  void Init(int64_t key, const py::object& value, bool auxiliary) {
    auto v = Borrow(value, false, key, "the initial value");
    Call([&] {
      return auxiliary ? store_->InitAuxiliary(key, v->tensor) : store_->Init(key, v->tensor);
    });
  }

  void Push(int64_t key, const py::object& grad) {
    auto g = Borrow(grad, false, key, "the gradient");
    Call([&] { return store_->Push(key, g->tensor); });
  }

  void Pull(int64_t key, const py::object& out) {
    auto o = Borrow(out, true, key, "the output");
    Call([&] { return store_->Pull(key, &o->tensor); });
  }

  // Starts key's push of grad and pull into out; both stay borrowed until Wait(key).
  void PushPull(int64_t key, const py::object& grad, const py::object& out) {
    if (in_flight_.count(key) > 0) {
      throw Error(absl::StrCat("key ", key, ": a pushpull is in flight; wait() for it first"));
    }
    auto op = std::make_unique<InFlight>();
    op->grad = Borrow(grad, false, key, "the gradient");
    op->out = Borrow(out, true, key, "the output");
    Call([&] { return store_->PushPull(key, op->grad->tensor, &op->out->tensor); });
    in_flight_[key] = std::move(op);
  }

  void Wait(int64_t key) {
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = store_->Wait(key);
      if (!status.ok()) last_failure_ = status;
    }
    in_flight_.erase(key);  // with the GIL: drops the arrays' references
    Check(status);
  }

  // After a call raised: the store recovers from its failure (KVStore::Recover: a shard came
  // back, an elastic job's workers changed), or raises it again; with no failure since the
  // last recovery, it joins the job's current generation (KVStore::CatchUp). Every worker of
  // the generation calls it at once (cohort.torch.elastic's reset); then the caller pulls
  // every key and goes on from StartStep().
  void Recover() {
    Call([&] {
      const absl::Status failure = std::exchange(last_failure_, absl::OkStatus());
      return failure.ok() ? store_->CatchUp() : store_->Recover(failure);
    });
    in_flight_.clear();  // the streams were stopped: nothing writes into these any more
  }

  // Whether the job's workers changed since the store's generation (its next call raises).
  bool workers_changed() const { return store_->WorkersChanged(); }

  // Whether a call failed since the last Recover (an error raised by Python is none).
  bool failed() {
    py::gil_scoped_release release;  // a call in flight holds mu_ while it waits
    std::lock_guard<std::mutex> lock(mu_);
    return !last_failure_.ok();
  }

  // (rank, hosts): the host every worker of the job's current generation registered from, by
  // rank, and this worker's rank there.
  std::pair<int, std::vector<std::string>> WorkerHosts() {
    if (worker_ == nullptr) return {0, {HostName()}};
    absl::StatusOr<ShardsView> view;
    {
      py::gil_scoped_release release;
      view = worker_->member()->WaitForShards(absl::InfiniteDuration());
    }
    Check(view.status());
    return {view->rank, view->worker_hosts};
  }

  void Barrier() {
    Call([&] { return store_->Barrier(); });
  }

  // What every worker brought (bytes), by rank, once every one has called it.
  std::vector<py::bytes> Exchange(const py::bytes& payload) {
    std::string mine = payload;  // with the GIL
    absl::StatusOr<std::vector<std::string>> all;
    Call([&] {
      all = store_->Exchange(std::move(mine));
      return all.status();
    });
    return std::vector<py::bytes>(all->begin(), all->end());
  }

  // One training step for the worker's metrics (cohort_worker_*, the dashboards' images/sec
  // and Comm%) and the scheduler's status page; nothing for the local store.
  void RecordStep(int64_t step, int64_t epoch, int64_t images, double step_seconds,
                  double comm_seconds, double loss, double lr) {
    if (worker_ == nullptr) return;
    StepReport report;
    report.step = step;
    report.epoch = epoch;
    report.images = images;
    report.lr = lr;
    report.step_seconds = step_seconds;
    report.step_result.loss = loss;
    report.step_result.pull_seconds = comm_seconds;
    worker_->metrics()->StepDone(report);
  }

  // Where /metrics is served (None for the local store).
  std::optional<int> metrics_port() const {
    if (worker_ == nullptr) return std::nullopt;
    return worker_->metrics_port();
  }

  int64_t StartStep() {
    absl::StatusOr<int64_t> step;
    Call([&] {
      step = store_->StartStep();
      return step.status();
    });
    return *step;
  }

 private:
  struct InFlight {
    std::unique_ptr<BorrowedArray> grad;
    std::unique_ptr<BorrowedArray> out;
  };

  // Runs one call of the store without the GIL, one thread at a time; raises its error (kept
  // for Recover).
  template <typename F>
  void Call(F call) {
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = call();
      if (!status.ok()) last_failure_ = status;
    }
    Check(status);
  }

  // Declared first, so destroyed last: the store ends (and stops writing) before the arrays
  // of its pushpulls in flight are let go.
  std::map<int64_t, std::unique_ptr<InFlight>> in_flight_;  // under the GIL
  std::mutex mu_;                                           // one call at a time
  absl::Status last_failure_;                               // under mu_
  std::shared_ptr<WorkerProcess> worker_;
  std::unique_ptr<KVStore> store_;
  const std::string compression_;
};

// "local", or a distributed store of the job in the COHORT_* variables, with the worker's
// membership and metrics (as the worker binary's: /metrics, the status page's progress).
std::unique_ptr<PyKVStore> Create(const std::string& type) {
  if (type == "local") return std::make_unique<PyKVStore>(nullptr, Check(CreateKVStore(type)));
  absl::StatusOr<std::unique_ptr<WorkerProcess>> worker;
  absl::StatusOr<std::unique_ptr<KVStore>> store;
  std::string compression;
  {
    py::gil_scoped_release release;
    absl::StatusOr<JobOptions> job = JobOptionsFromEnvironment();
    if (job.ok()) compression = GradientCompressionName(job->compression);
    worker = job.ok() ? WorkerProcess::Join(*job, /*threads=*/0)
                      : job.status();
    if (worker.ok()) {
      store = CreateDistKVStore(type, (*worker)->member(), *job);
      if (!store.ok()) (*worker)->member()->Leave(store.status());
    }
  }
  std::unique_ptr<WorkerProcess> joined = Check(std::move(worker));
  return std::make_unique<PyKVStore>(std::move(joined), Check(std::move(store)),
                                     std::move(compression));
}

}  // namespace
}  // namespace cohort

PYBIND11_MODULE(_cohort, m) {
  using cohort::PyKVStore;
  m.doc() = "Cohort's kvstore (the C++ side of the cohort package)";
  py::register_exception<cohort::Error>(m, "Error", PyExc_RuntimeError);
  m.def("create", &cohort::Create, py::arg("type"),
        "A kvstore: 'local' (this process) or 'dist_sync'/'dist_async' (joins the job the "
        "launcher describes in COHORT_* variables).");
  py::class_<PyKVStore>(m, "KVStore")
      .def_property_readonly("type", &PyKVStore::type)
      .def_property_readonly("gradient_compression", &PyKVStore::gradient_compression)
      .def_property_readonly("rank", &PyKVStore::rank)
      .def_property_readonly("num_workers", &PyKVStore::num_workers)
      .def("set_optimizer", &PyKVStore::SetOptimizer, py::arg("optimizer"), py::arg("lr"),
           py::arg("momentum"), py::arg("wd"), py::arg("lr_schedule"), py::arg("epochs"),
           py::arg("steps_per_epoch"), py::arg("warmup_epochs"), py::arg("beta1"),
           py::arg("beta2"), py::arg("eps"))
      .def("set_learning_rate", &PyKVStore::SetLearningRate, py::arg("lr"))
      .def("init", &PyKVStore::Init, py::arg("key"), py::arg("value"), py::arg("auxiliary"))
      .def("push", &PyKVStore::Push, py::arg("key"), py::arg("grad"))
      .def("pull", &PyKVStore::Pull, py::arg("key"), py::arg("out"))
      .def("pushpull", &PyKVStore::PushPull, py::arg("key"), py::arg("grad"), py::arg("out"))
      .def("wait", &PyKVStore::Wait, py::arg("key"))
      .def("barrier", &PyKVStore::Barrier)
      .def("exchange", &PyKVStore::Exchange, py::arg("payload"))
      .def("start_step", &PyKVStore::StartStep)
      .def("recover", &PyKVStore::Recover)
      .def_property_readonly("workers_changed", &PyKVStore::workers_changed)
      .def_property_readonly("failed", &PyKVStore::failed)
      .def("worker_hosts", &PyKVStore::WorkerHosts)
      .def("record_step", &PyKVStore::RecordStep, py::arg("step"), py::arg("epoch"),
           py::arg("images"), py::arg("step_seconds"), py::arg("comm_seconds"),
           py::arg("loss"), py::arg("lr"))
      .def_property_readonly("metrics_port", &PyKVStore::metrics_port);
  m.def("set_exit_reason", &cohort::ExitVerdict::SetReason, py::arg("reason"),
        "The exception ending the program (its last line), said with its exit status.");
}
