#include "trainer/loop/training.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "trainer/base/status_macros.h"
#include "trainer/data/dataset.h"
#include "trainer/loop/devices.h"
#include "trainer/data/prefetch.h"
#include "trainer/eval/accuracy.h"
#include "trainer/io/model_file.h"
#include "trainer/kvstore/kvstore_mode.h"
#include "trainer/models/models.h"
#include "trainer/nn/loss.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer.h"
#include "trainer/loop/progress_log.h"
#include "trainer/loop/step.h"
#include "trainer/loop/training_data.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Evaluation batches hold as many values as 1,000 CIFAR images (3x32x32), which fit beside any
// model here, and at least a training batch: 1,000 ImageNet-sized images would not.
int64_t EvalBatch(int64_t batch_size, const Shape& sample) {
  constexpr int64_t kEvalValues = int64_t{1000} * 3 * 32 * 32;
  return std::max(batch_size, std::min<int64_t>(1000, kEvalValues / sample.numel()));
}

}  // namespace

absl::Status ValidateTrainOptions(const TrainOptions& o) {
  auto positive = [](const char* flag, double v) {
    return v > 0 ? absl::OkStatus()
                 : absl::InvalidArgumentError(absl::StrCat("--", flag, "=", v, ": must be > 0"));
  };
  RETURN_IF_ERROR(positive("batch_size", o.batch_size));
  RETURN_IF_ERROR(ParsePrecision(o.precision).status());
  RETURN_IF_ERROR(positive("epochs", o.epochs));
  if (o.train_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train_samples=", o.train_samples, ": must be >= 0 (0: all)"));
  }
  RETURN_IF_ERROR(positive("lr", o.lr));
  RETURN_IF_ERROR(positive("log_interval", o.log_interval));
  if (o.warmup_epochs < 0 || o.warmup_epochs >= o.epochs) {
    return absl::InvalidArgumentError(absl::StrCat("--warmup_epochs=", o.warmup_epochs,
                                                   ": must be in [0, --epochs=", o.epochs, ")"));
  }
  RETURN_IF_ERROR(MakeOptimizer(o.optimizer, {o.momentum, o.wd}).status());
  if (!ParseKVStoreMode(o.kv_store).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_store=", o.kv_store, ": expected local, dist_sync or dist_async"));
  }
  RETURN_IF_ERROR(ParseLrScheduleKind(o.lr_schedule).status());
  if (o.elastic_lr != "keep" && o.elastic_lr != "scale") {
    return absl::InvalidArgumentError(
        absl::StrCat("--elastic_lr=", o.elastic_lr, ": expected keep or scale"));
  }
  RETURN_IF_ERROR(ParseAugment(o.augment, 32).status());
  if (o.momentum < 0 || o.momentum >= 1) {
    return absl::InvalidArgumentError(absl::StrCat("--momentum=", o.momentum, ": must be in [0, 1)"));
  }
  if (o.wd < 0) return absl::InvalidArgumentError(absl::StrCat("--wd=", o.wd, ": must be >= 0"));
  return absl::OkStatus();
}

absl::StatusOr<Augmentation> ParseAugment(const std::string& augment, int64_t image_side) {
  Augmentation a;
  if (augment == "none") return a;
  a.horizontal_flip = true;
  if (augment == "flip") return a;
  a.crop_padding = static_cast<int>(image_side / 8);
  if (augment == "crop_flip") return a;
  return absl::InvalidArgumentError(
      absl::StrCat("--augment=", augment, ": expected none, flip or crop_flip"));
}

namespace {

// Every rank runs floor(N / (W·b)) steps an epoch (Contracts, "Sampler"); none is an error.
absl::StatusOr<int64_t> StepsPerEpoch(const TrainOptions& options, int num_workers,
                                      const DataPartition& partition) {
  const int64_t steps = partition.StepsPerEpoch(num_workers, options.batch_size);
  if (steps > 0) return steps;
  if (partition.by_files()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data_partition=files: ", num_workers, " workers share ",
        partition.records_per_file.size(), " record files, and the one with the fewest images "
        "has fewer than --batch_size=", options.batch_size,
        ": pack the images into more, smaller files, or partition by samples"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--batch_size=", options.batch_size, " × ", num_workers,
      " workers is larger than the training set (", partition.size, " samples)"));
}

}  // namespace

absl::Status CheckTrainingData(const TrainOptions& options, int num_workers) {
  std::ostream quiet(nullptr);
  ASSIGN_OR_RETURN(const TrainingData data, OpenTrainingData(options, false, quiet));
  return StepsPerEpoch(options, num_workers, data.partition).status();
}

namespace {

// This rank's model replicas, one per device context; the first is evaluated and exported.
struct Replicas {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::unique_ptr<SoftmaxCrossEntropyLoss>> losses;
  std::vector<Replica> views;  // what the step runner trains
};

absl::StatusOr<Replicas> BuildReplicas(const TrainOptions& options,
                                       std::vector<std::unique_ptr<Backend>> backends,
                                       const Shape& sample, int num_classes) {
  Replicas r;
  r.backends = std::move(backends);
  for (const auto& backend : r.backends) {
    ASSIGN_OR_RETURN(r.models.emplace_back(),
                     BuildModel(options.model, backend.get(), sample, num_classes));
    r.models.back()->InitParameters(options.seed);
    r.losses.push_back(std::make_unique<SoftmaxCrossEntropyLoss>(backend.get()));
    r.views.push_back({r.models.back().get(), r.losses.back().get(), backend.get()});
  }
  return r;
}

// What the workers of one membership generation run (an elastic job plans again when its
// workers change): every rank runs the same steps over the global batch (Contracts,
// "Sampler"), and the update rule the kvstore runs over the job's steps.
struct Plan {
  int rank = 0;
  int num_workers = 1;
  bool lead = false;  // rank 0 speaks for the job: the table, evaluation and the model file
  int64_t global_batch = 0;
  int64_t steps_per_epoch = 0;
  OptimizerSpec optimizer;
  LrSchedule schedule;  // the one the kvstore applies, for the progress table
};

// The update rule for W workers: the optimizer and the learning-rate schedule over the job's
// steps; the linear scaling rule with --scale_lr; an elastic job's rate follows the workers
// with --elastic_lr=scale and stays that of the workers it started with otherwise.
absl::StatusOr<OptimizerSpec> UpdateRule(const TrainOptions& options, int num_workers,
                                         int initial_num_workers, int64_t steps_per_epoch) {
  OptimizerSpec spec;
  spec.optimizer = options.optimizer;
  spec.optimizer_options = {options.momentum, options.wd};
  LrScheduleOptions& lr = spec.lr_schedule;
  ASSIGN_OR_RETURN(lr.kind, ParseLrScheduleKind(options.lr_schedule));
  const int64_t initial_batch = options.batch_size * initial_num_workers;
  const int64_t lr_batch =
      options.batch_size * (options.elastic_lr == "scale" ? num_workers : initial_num_workers);
  lr.base_lr = options.scale_lr ? LinearScaledLr(options.lr, lr_batch)
                                : options.lr * static_cast<double>(lr_batch) / initial_batch;
  lr.epochs = options.epochs;
  lr.steps_per_epoch = steps_per_epoch;
  lr.warmup_epochs = options.warmup_epochs;
  return spec;
}

// The step where a store's values are after its Init and pulls: 0 for a store without recovery.
absl::StatusOr<int64_t> StartStepOf(KVStore& kvstore) {
  KVStoreRecovery* recovery = kvstore.recovery();
  return recovery != nullptr ? recovery->StartStep() : 0;
}

// The number of workers the job started with.
int InitialWorkersOf(KVStore& kvstore) {
  const KVStoreRecovery* recovery = kvstore.recovery();
  return recovery != nullptr ? recovery->initial_num_workers() : kvstore.num_workers();
}

absl::StatusOr<Plan> MakePlan(const TrainOptions& options, const DataPartition& partition,
                              KVStore& kvstore) {
  const int num_workers = kvstore.num_workers();
  const int64_t global_batch = options.batch_size * num_workers;
  ASSIGN_OR_RETURN(const int64_t steps_per_epoch,
                   StepsPerEpoch(options, num_workers, partition));
  ASSIGN_OR_RETURN(OptimizerSpec optimizer,
                   UpdateRule(options, num_workers, InitialWorkersOf(kvstore), steps_per_epoch));
  ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(optimizer.lr_schedule));
  return Plan{kvstore.rank(),  num_workers,          kvstore.rank() == 0,
              global_batch,    steps_per_epoch,      std::move(optimizer),
              std::move(schedule)};
}

absl::Status OpenJsonLog(const std::string& path, std::ofstream* log) {
  log->open(path, std::ios::trunc);
  if (*log) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--log_json=", path, ": cannot open it for writing: ", strerror(errno)));
}

// What stays fixed while the epochs run.
struct EpochLoop {
  const TrainOptions& options;
  StepRunner* runner;
  BatchPrefetcher* batches;
  const LrSchedule* schedule;
  ProgressLog* progress;  // rank 0's; null on the others
  TrainingObserver* observer;
  const SampleSource* source;  // what the batches come from
  const Allocator* memory;     // the first device context's, whose peak the observer hears of
  int64_t steps_per_epoch;
  int64_t global_batch;
};

// What the epochs run so far add up to, across roll backs.
struct TrainedSoFar {
  double seconds = 0;       // in the epochs' steps
  double wall_seconds = 0;  // the same, with the evaluations between epochs
  // The job's images in the steps this process ran (steps after a roll back run again; an
  // elastic job's global batch varies).
  int64_t images = 0;
  TrainResult result;
};

struct EpochTimes {
  double seconds = 0;
  double data_wait_seconds = 0;  // steps that found their batch not yet assembled
  // The steps' phases (StepResult): where a job's epoch goes beyond one process's.
  double forward_seconds = 0, backward_seconds = 0, kvstore_seconds = 0;
};

// One epoch's steps from `first` (a resumed job starts inside an epoch; step counts them across
// epochs), then every replica holds the latest parameters.
absl::StatusOr<EpochTimes> RunEpoch(const EpochLoop& loop, int64_t epoch, int64_t first,
                                    int64_t* step) {
  EpochTimes times;
  const auto epoch_start = Clock::now();
  auto interval_start = epoch_start;
  double interval_loss = 0, interval_comm = 0;
  int64_t interval_steps = 0;
  const int64_t total_steps = loop.options.epochs * loop.steps_per_epoch;
  for (int64_t s = first; s < loop.steps_per_epoch; ++s) {
    const auto wait_start = Clock::now();
    ASSIGN_OR_RETURN(const Batch* next, loop.batches->Next());
    const Batch& batch = *next;
    const double data_seconds = Seconds(Clock::now() - wait_start);
    times.data_wait_seconds += data_seconds;
    const float lr = static_cast<float>(loop.schedule->At(*step));
    ASSIGN_OR_RETURN(const StepResult r, loop.runner->Step(batch.images, batch.labels));
    interval_loss += r.loss;
    interval_comm += r.comm_seconds();
    times.forward_seconds += r.forward_seconds;
    times.backward_seconds += r.backward_seconds;
    times.kvstore_seconds += r.comm_seconds();
    ++*step;
    ++interval_steps;
    if (loop.observer != nullptr) {
      loop.observer->StepDone({*step, epoch, batch.images.shape()[0], lr,
                               Seconds(Clock::now() - wait_start), data_seconds, r, total_steps,
                               loop.source->skipped(), loop.memory->memory_use().peak});
    }
    if (*step % loop.options.log_interval == 0) {
      const auto now = Clock::now();
      const double seconds = Seconds(now - interval_start);
      // Speed counts the whole job: every rank ran these steps on its own batch.
      if (loop.progress != nullptr) {
        loop.progress->Row({*step, epoch, interval_steps * loop.global_batch / seconds,
                            interval_loss / interval_steps, lr, interval_comm / seconds,
                            absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()),
                            static_cast<double>(total_steps - *step) * seconds /
                                static_cast<double>(interval_steps)});
      }
      interval_start = now;
      interval_loss = interval_comm = 0;
      interval_steps = 0;
    }
  }
  RETURN_IF_ERROR(loop.runner->WaitForParameters());
  times.seconds = Seconds(Clock::now() - epoch_start);
  return times;
}

// Writes the first replica to options.output (a model computing in 16 bits exports the
// kvstore's fp32 master weights).
absl::Status ExportModel(const TrainOptions& options, const Model& model, KVStore* kvstore,
                         const ChannelNormalization& norm, std::ostream& out) {
  const auto values = [](const std::vector<float>& v) {
    return absl::StrJoin(v, ",", [](std::string* out, float x) {
      absl::StrAppendFormat(out, "%.9g", x);
    });
  };
  std::vector<Tensor> masters;
  if (model.parameters()[0]->value.dtype() != DType::kF32) {
    for (size_t k = 0; k < model.parameters().size(); ++k) {
      RETURN_IF_ERROR(kvstore->Pull(static_cast<int64_t>(k),
                                    &masters.emplace_back(model.parameters()[k]->value.shape())));
    }
  }
  RETURN_IF_ERROR(SaveModel(model,
                            {{"dataset", options.dataset},
                             {"input_mean", values(norm.mean)},
                             {"input_std", values(norm.std)},
                             {"format", "pt"}},
                            options.output, masters.empty() ? nullptr : &masters));
  out << "Wrote " << options.output << "\n" << std::flush;
  return absl::OkStatus();
}

// One process's training once its model, data and kvstore are set up: it starts at the step
// the shards are at, runs the epochs to the end, going back whenever the kvstore recovers from
// a failure, and reports (rank 0: evaluates and exports the model).
class TrainingRun {
 public:
  TrainingRun(const TrainOptions& options, KVStore* kvstore, TrainingData* data,
              Replicas* replicas, Plan plan, std::ostream& out, TrainingObserver* observer)
      : options_(options),
        kvstore_(kvstore),
        data_(*data),
        replicas_(replicas),
        model_(replicas->models[0].get()),
        plan_(std::move(plan)),
        out_(out),
        observer_(observer) {}

  absl::StatusOr<TrainResult> Run() {
    ASSIGN_OR_RETURN(const int64_t first_step, Start());
    const int64_t total_steps = options_.epochs * plan_.steps_per_epoch;
    if (first_step > total_steps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the shards resumed at step ", first_step, ", past this job's end (--epochs=",
          options_.epochs, " x ", plan_.steps_per_epoch, " steps): resume with the flags of the "
          "job that wrote the checkpoint, or more --epochs"));
    }
    if (plan_.lead && !options_.log_json.empty()) {
      RETURN_IF_ERROR(OpenJsonLog(options_.log_json, &json_log_));
    }
    progress_.emplace(&out_, json_log_.is_open() ? &json_log_ : nullptr);
    SayStart(first_step);
    ASSIGN_OR_RETURN(const TrainedSoFar so_far, TrainToTheEnd(first_step));
    return Finish(so_far, first_step == total_steps);
  }

 private:
  // Every rank initialises the kvstore and goes on at the step the shards are at: 0, or a
  // resumed checkpoint's (the sampler's position and the augmentation derive from (seed, epoch,
  // step), so nothing else is restored).
  absl::StatusOr<int64_t> Start() {
    absl::StatusOr<int64_t> started = [&]() -> absl::StatusOr<int64_t> {
      RETURN_IF_ERROR(InitKVStore(*model_, kvstore_));
      return StartStepOf(*kvstore_);
    }();
    if (!started.ok()) started = GoBackAfter(started.status());
    RETURN_IF_ERROR(started.status());
    // Committing may have moved the store on to another generation.
    ASSIGN_OR_RETURN(plan_, MakePlan(options_, data_.partition, *kvstore_));
    return started;
  }

  // The epochs from `first_step` to the end. When the membership changes under a step (a dead
  // shard came back from its checkpoint, or an elastic job's workers changed) and the kvstore
  // recovers, every rank goes back to the step the shards are at now, with the plan of the
  // workers there are now, and runs again from there; the steps run twice count twice.
  absl::StatusOr<TrainedSoFar> TrainToTheEnd(int64_t first_step) {
    TrainedSoFar so_far;
    for (int64_t from = first_step;;) {
      const absl::Status trained = RunEpochsFrom(from, &so_far);
      if (trained.ok()) return so_far;
      ASSIGN_OR_RETURN(from, GoBackAfter(trained));
    }
  }

  // After a failure the kvstore recovers from: the parameters pulled, the plan made again, and
  // the step the shards are at. A pull that fails as the first failure did (another shard died
  // meanwhile) is recovered from in turn.
  absl::StatusOr<int64_t> GoBackAfter(absl::Status failure) {
    while (!failure.ok()) {
      KVStoreRecovery* recovery = kvstore_->recovery();
      if (recovery == nullptr) return failure;
      RETURN_IF_ERROR(recovery->Recover(failure));
      failure = PullKVStore(*model_, kvstore_);
    }
    ASSIGN_OR_RETURN(plan_, MakePlan(options_, data_.partition, *kvstore_));
    ASSIGN_OR_RETURN(const int64_t from, StartStepOf(*kvstore_));
    out_ << absl::StrFormat(
                "train: rank %d of %d: rolled back to step %d (epoch %d, step %d of %d)\n",
                plan_.rank, plan_.num_workers, from, from / plan_.steps_per_epoch,
                from % plan_.steps_per_epoch, plan_.steps_per_epoch)
         << std::flush;
    return from;
  }

  void SayStart(int64_t first_step) {
    if (data_.partition.by_files()) {
      const std::vector<int> files = data_.partition.FilesOf(plan_.rank, plan_.num_workers);
      int64_t images = 0;
      for (const int f : files) images += data_.partition.records_per_file[static_cast<size_t>(f)];
      out_ << absl::StrFormat("train: rank %d of %d reads files %s of the %d of %s (%d images)\n",
                              plan_.rank, plan_.num_workers, absl::StrJoin(files, ","),
                              data_.partition.records_per_file.size(), data_.train->name(),
                              images)
           << std::flush;
    }
    if (plan_.lead) {
      const LrScheduleOptions& lr_options = plan_.optimizer.lr_schedule;
      out_ << absl::StrFormat(
          "train: %s on %s (%d train / %d test images, %s), %d parameters, batch %d x %d "
          "worker(s), %d epochs, %s, lr %g %s (warm-up %g epochs), augment %s, kvstore %s, "
          "backend %s on %s (%s), %d hardware threads\n",
          options_.model, options_.dataset, data_.train->size(), data_.test->size(),
          data_.train->sample_shape().ToString(), model_->num_parameter_elements(),
          options_.batch_size, plan_.num_workers, options_.epochs, options_.optimizer,
          lr_options.base_lr, options_.lr_schedule, options_.warmup_epochs, options_.augment,
          kvstore_->type(), replicas_->backends[0]->name(), options_.devices, options_.precision,
          std::thread::hardware_concurrency());
      if (first_step > 0) {
        out_ << absl::StrFormat("train: resuming at step %d (epoch %d, step %d of %d)\n",
                                first_step, first_step / plan_.steps_per_epoch,
                                first_step % plan_.steps_per_epoch, plan_.steps_per_epoch);
      }
      progress_->Header();
    } else if (first_step > 0) {  // a resumed job, or a worker joining an elastic one
      out_ << absl::StrFormat(
                  "train: rank %d of %d: starting at step %d (epoch %d, step %d of %d)\n",
                  plan_.rank, plan_.num_workers, first_step, first_step / plan_.steps_per_epoch,
                  first_step % plan_.steps_per_epoch, plan_.steps_per_epoch)
           << std::flush;
    }
  }

  // Runs the epochs from step `from` to the end, adding to so_far.
  absl::Status RunEpochsFrom(int64_t from, TrainedSoFar* so_far) {
    PrefetchOptions prefetch;
    prefetch.seed = options_.seed;
    prefetch.rank = plan_.rank;
    prefetch.num_workers = plan_.num_workers;
    prefetch.batch_size = options_.batch_size;
    prefetch.partition = &data_.partition;
    prefetch.first_epoch = from / plan_.steps_per_epoch;
    prefetch.first_step = from % plan_.steps_per_epoch;
    prefetch.end_epoch = options_.epochs;
    prefetch.allocator = replicas_->backends[0]->host_allocator();
    BatchPrefetcher batches(data_.train.get(), prefetch);
    StepRunner runner(replicas_->views, kvstore_, options_.overlap);
    const EpochLoop loop{options_, &runner, &batches, &plan_.schedule,
                         plan_.lead ? &*progress_ : nullptr, observer_, data_.train.get(),
                         replicas_->backends[0]->allocator(), plan_.steps_per_epoch,
                         plan_.global_batch};
    int64_t step = from;
    const absl::Time started = absl::Now();
    const double wall_before = so_far->wall_seconds;
    for (int64_t epoch = prefetch.first_epoch; epoch < options_.epochs; ++epoch) {
      const int64_t first = epoch == prefetch.first_epoch ? prefetch.first_step : 0;
      const int64_t before = step;
      ASSIGN_OR_RETURN(const EpochTimes times, RunEpoch(loop, epoch, first, &step));
      so_far->seconds += times.seconds;
      so_far->images += (step - before) * plan_.global_batch;
      if (plan_.lead) RETURN_IF_ERROR(EvaluateEpoch(epoch, first, times, &so_far->result));
      so_far->wall_seconds = absl::ToDoubleSeconds(absl::Now() - started) + wall_before;
    }
    return absl::OkStatus();
  }

  absl::Status EvaluateEpoch(int64_t epoch, int64_t first, const EpochTimes& times,
                             TrainResult* result) {
    ASSIGN_OR_RETURN(const Accuracy acc, EvaluateTest());
    result->test_top1 = acc.top1_percent();
    result->test_top5 = acc.top5_percent();
    if (observer_ != nullptr) observer_->EpochEvaluated(epoch, result->test_top1);
    // What is left, at this epoch's pace a step.
    const int64_t steps_left = (options_.epochs - epoch - 1) * plan_.steps_per_epoch;
    const std::string eta =
        steps_left > 0
            ? absl::StrCat(", ETA ",
                           DurationText(static_cast<double>(steps_left) * times.seconds /
                                        static_cast<double>(plan_.steps_per_epoch - first)))
            : "";
    out_ << absl::StrFormat(
        "Epoch %d: %.1f s (forward %.2f s, backward %.2f s, kvstore %.2f s, %.2f s waiting "
        "for data), %.1f img/s, test top-1 %.2f%% top-5 %.2f%%%s\n",
        epoch, times.seconds, times.forward_seconds, times.backward_seconds,
        times.kvstore_seconds, times.data_wait_seconds,
        (plan_.steps_per_epoch - first) * plan_.global_batch / times.seconds, result->test_top1,
        result->test_top5, eta);
    out_.flush();  // a job's launcher shows each line as it comes, in order with the others
    return absl::OkStatus();
  }

  // The result and its report; rank 0 exports the model. at_the_end: the job resumed at its
  // very last step (no epoch ran, so nothing was evaluated).
  absl::StatusOr<TrainResult> Finish(const TrainedSoFar& so_far, bool at_the_end) {
    TrainResult result = so_far.result;
    const double train_seconds = so_far.seconds;
    // Per epoch of steps this process ran (a resumed job ran fewer).
    const double epochs_run = static_cast<double>(so_far.images) /
                              static_cast<double>(plan_.steps_per_epoch * plan_.global_batch);
    if (plan_.lead && at_the_end) {
      ASSIGN_OR_RETURN(const Accuracy acc, EvaluateTest());
      result.test_top1 = acc.top1_percent();
      result.test_top5 = acc.top5_percent();
    }
    result.seconds_per_epoch = epochs_run > 0 ? train_seconds / epochs_run : 0;
    result.images_per_second = train_seconds > 0 ? so_far.images / train_seconds : 0;
    const Allocator& memory = *replicas_->backends[0]->allocator();
    result.memory_peak_bytes = memory.memory_use().peak;
    const std::string peak = absl::StrFormat(
        "peak memory %.1f MiB (%s)", static_cast<double>(result.memory_peak_bytes) / (1 << 20),
        memory.device().kind == Device::Kind::kCpu ? "host tensors" : memory.device().ToString());
    if (!plan_.lead) {
      out_ << absl::StrFormat("train: rank %d of %d done; %.1f s/epoch; %s\n", plan_.rank,
                              plan_.num_workers, result.seconds_per_epoch, peak)
           << std::flush;
      return result;
    }
    // Over the whole run, the evaluations between epochs included: what a rate of the images
    // counter (the dashboard's "Job images/sec") reads.
    const double wall_images_per_second =
        so_far.wall_seconds > 0 ? so_far.images / so_far.wall_seconds : 0;
    out_ << absl::StrFormat(
                "Test top-1 %.2f%% top-5 %.2f%% (%d images); %.1f s/epoch, %.1f img/s; %.1f "
                "img/s with the evaluations; %s\n",
                result.test_top1, result.test_top5, data_.test->size(), result.seconds_per_epoch,
                result.images_per_second, wall_images_per_second, peak)
         << std::flush;
    if (!options_.output.empty()) {
      RETURN_IF_ERROR(
          ExportModel(options_, *model_, kvstore_, data_.train->normalization(), out_));
    }
    return result;
  }

  absl::StatusOr<Accuracy> EvaluateTest() {
    return Evaluate(model_, data_.test.get(),
                    EvalBatch(options_.batch_size, data_.test->sample_shape()));
  }

  const TrainOptions& options_;
  KVStore* const kvstore_;
  TrainingData& data_;
  Replicas* const replicas_;
  Model* const model_;
  Plan plan_;
  std::ostream& out_;
  TrainingObserver* const observer_;
  std::ofstream json_log_;
  std::optional<ProgressLog> progress_;  // once the run starts
};

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainOptions& options, const KVStoreFactory& make_kvstore,
                                  std::ostream& out, TrainingObserver* observer) {
  RETURN_IF_ERROR(ValidateTrainOptions(options));
  ASSIGN_OR_RETURN(const Precision precision, ParsePrecision(options.precision));
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Backend>> backends,
                   MakeDeviceBackends(options.devices, {precision, options.deterministic}));
  if (options.batch_size < static_cast<int64_t>(backends.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size=", options.batch_size, " cannot be split over the ", backends.size(),
        " device contexts of --devices=", options.devices));
  }
  // This thread evaluates and exports the first replica: on a GPU, from that GPU (the last one
  // made is current).
  if (backends[0]->allocator()->device().kind != Device::Kind::kCpu) {
    backends[0]->BindCallingThread();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<KVStore> kvstore, make_kvstore(options.kv_store));
  ASSIGN_OR_RETURN(TrainingData data, OpenTrainingData(options, kvstore->rank() == 0, out));
  ASSIGN_OR_RETURN(Replicas replicas, BuildReplicas(options, std::move(backends),
                                                    data.train->sample_shape(),
                                                    data.train->num_classes()));
  ASSIGN_OR_RETURN(Plan plan, MakePlan(options, data.partition, *kvstore));
  RETURN_IF_ERROR(kvstore->SetOptimizer(plan.optimizer));
  // An elastic job's shards take the new number of workers' rule when its workers change.
  const DataPartition* partition = &data.partition;
  KVStore* store = kvstore.get();
  if (KVStoreRecovery* recovery = store->recovery()) {
    recovery->SetUpdateRuleFor([&options, partition, recovery](int num_workers) {
      return UpdateRule(options, num_workers, recovery->initial_num_workers(),
                        partition->StepsPerEpoch(num_workers, options.batch_size));
    });
  }
  TrainingRun run(options, store, &data, &replicas, std::move(plan), out, observer);
  return run.Run();
}

}  // namespace cohort
