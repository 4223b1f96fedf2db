#ifndef COHORT_TRAINER_LOOP_TRAINING_H_
#define COHORT_TRAINER_LOOP_TRAINING_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/data/augment.h"
#include "trainer/kvstore/kvstore.h"
#include "trainer/ops/op.h"
#include "trainer/loop/step.h"
#include "trainer/loop/training_observer.h"

namespace cohort {

// What `train` does; flag names follow the Contracts.
struct TrainOptions {
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // empty: the dataset's default directory
  int64_t batch_size = 64;
  int64_t epochs = 10;
  int64_t train_samples = 0;  // train on the first N samples only (0: all of them)
  std::string optimizer = "sgd";         // sgd | adam
  double lr = 0.02;
  std::string lr_schedule = "cosine";  // constant | step | cosine | poly
  double warmup_epochs = 0;              // linear warm-up before the schedule
  bool scale_lr = false;  // linear scaling rule: lr × global batch / 256
  // An elastic job whose workers changed: keep the rate of the workers it started with, or
  // scale it with their number (the linear scaling rule).
  std::string elastic_lr = "keep";  // keep | scale
  double momentum = 0.9;
  double wd = 1e-4;
  std::string kv_store = "local";  // local (this process) | dist_sync | dist_async
  std::string augment = "none";  // none | flip | crop_flip (crop padding = image side / 8)
  // Datasets of encoded images (--dataset imagefolder:DIR, recordio:PREFIX, tfrecord:GLOB).
  std::string eval_dataset;  // the evaluation split; empty: found beside the training one
  int64_t image_size = 224;  // the side of the samples the model takes
  int64_t eval_resize = 256;  // evaluation: the shorter side resized to this, then centre-cropped
  double min_crop_scale = 0.08;  // crop_flip: the smallest share of the image a crop covers
  int64_t image_channels = 3;  // 3: RGB; 1: grey
  std::string image_mean = "0.485,0.456,0.406";  // per channel, of pixel values in [0, 1]
  std::string image_std = "0.229,0.224,0.225";
  int64_t label_base = 1;  // TFRecord labels: stored less this (TensorFlow's ImageNet: 1)
  int64_t num_classes = 0;  // 0: found by reading every label at open
  int64_t data_threads = 0;  // decoding threads; 0: the process's share of the cores less one
  bool skip_corrupt = false;  // skip (and count) damaged samples instead of failing
  // Which samples each rank reads: samples (the Contracts' sampler) or files (record files
  // shared out between the ranks, each reading only its own).
  std::string data_partition = "samples";
  uint64_t seed = 42;
  int64_t log_interval = 100;  // steps between progress rows
  std::string output = "model.safetensors";  // empty: don't write the model
  std::string devices = "cpu";  // cpu | cpu:N (the local batch split over N contexts) | gpu:I
  std::string precision = "fp32";  // fp32 | tf32 | bf16 | fp16 (GPUs)
  // GPUs: only convolution algorithms that give the same bits every run (cudnn.deterministic);
  // CPU steps already do, for the same --devices and thread count.
  bool deterministic = false;
  // Push each gradient as backward produces it and wait for each layer's values only before
  // its forward (false: push everything after backward, then wait for everything).
  bool overlap = true;
  std::string log_json;  // rank 0 also writes the progress rows here as JSON lines (empty: no)
};

// Checks option values, naming the flag that is wrong.
absl::Status ValidateTrainOptions(const TrainOptions& options);
// Opens the training data the options name, reading and checking every file (a job's check
// before anything starts), and that it holds at least one step of num_workers workers. The
// error names the dataset and the file, or the batch and the number of workers.
absl::Status CheckTrainingData(const TrainOptions& options, int num_workers);

struct TrainResult {
  double test_top1 = 0;  // percent; rank 0 only
  double test_top5 = 0;
  double seconds_per_epoch = 0;  // training steps only, evaluation excluded
  double images_per_second = 0;
  int64_t memory_peak_bytes = 0;  // as StepReport's, at the end
};

// The augmentation an --augment value names for images of the given side.
absl::StatusOr<Augmentation> ParseAugment(const std::string& augment, int64_t image_side);

// The training loop of the single-process trainer and of every worker of a job. It trains on
// this rank's share of the data (Contracts, "Sampler") through the kvstore make_kvstore builds
// for options.kv_store: images smaller than the model's designed size are zero-padded up to
// it; batches are assembled (and augmented) on a background thread. Rank 0 prints the progress
// table `Step Epoch Speed(img/s) Loss LR Comm%` every log_interval steps (speed of the whole
// job; Comm% = share of the time spent in kvstore calls, i.e. communication not hidden behind
// computation; also as JSON lines to options.log_json), test top-1/top-5 after each epoch,
// then writes the model to options.output. Everything goes to out. observer, when given, is
// told about every step of this rank.
absl::StatusOr<TrainResult> Train(const TrainOptions& options, const KVStoreFactory& make_kvstore,
                                  std::ostream& out, TrainingObserver* observer = nullptr);

}  // namespace cohort

#endif  // COHORT_TRAINER_LOOP_TRAINING_H_
