#ifndef COHORT_TRAINER_CLI_TRAIN_FLAGS_H_
#define COHORT_TRAINER_CLI_TRAIN_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "trainer/loop/training.h"

// The training flags (Contracts, "Flags") shared by //trainer:train and //services:worker.
// Each binary's <binary>_main.cc expands COHORT_DEFINE_TRAIN_FLAGS() at file scope: the flags
// are then defined in that file, so its --help lists them; TrainOptionsFromFlags reads them.
#define COHORT_DEFINE_TRAIN_FLAGS()                                                              \
  ABSL_FLAG(std::string, model, cohort::TrainOptions().model,                                    \
            "model: lenet, mlp, resnet20, resnet32, resnet44, resnet56, resnet110 or resnet50 "  \
            "(alias --network)");                                                                \
  ABSL_FLAG(std::string, dataset, cohort::TrainOptions().dataset,                                \
            "dataset: fashion-mnist, mnist, cifar10, synthetic-cifar10, synthetic-imagenet, "    \
            "synthetic:CxHxW:K, or encoded images: imagefolder:DIR (class folders of JPEGs; "    \
            "DIR/train and DIR/val, or an im2rec .lst), recordio:PREFIX (PREFIX.rec or "         \
            "PREFIX-NNNNN.rec, with .idx) or tfrecord:GLOB (tf.train.Example records)");         \
  ABSL_FLAG(std::string, eval_dataset, "",                                                       \
            "encoded images: the evaluation split (default: beside --dataset, its last "         \
            "\"train\" made \"val\" or \"validation\")");                                        \
  ABSL_FLAG(int64_t, image_size, cohort::TrainOptions().image_size,                              \
            "encoded images: the side of the square samples the model takes");                   \
  ABSL_FLAG(int64_t, eval_resize, cohort::TrainOptions().eval_resize,                            \
            "encoded images: evaluation resizes the shorter side to this, then takes the "       \
            "centre --image_size square (training too, unless --augment=crop_flip)");            \
  ABSL_FLAG(double, min_crop_scale, cohort::TrainOptions().min_crop_scale,                       \
            "encoded images, --augment=crop_flip: the smallest share of an image's area a "      \
            "random crop covers (RandomResizedCrop's scale, up to 1)");                          \
  ABSL_FLAG(int64_t, image_channels, cohort::TrainOptions().image_channels,                      \
            "encoded images: 3 (RGB) or 1 (grey)");                                              \
  ABSL_FLAG(std::string, image_mean, cohort::TrainOptions().image_mean,                          \
            "encoded images: the mean subtracted, per channel, of pixel values in [0, 1]");       \
  ABSL_FLAG(std::string, image_std, cohort::TrainOptions().image_std,                            \
            "encoded images: the standard deviation divided by, per channel");                   \
  ABSL_FLAG(int64_t, label_base, cohort::TrainOptions().label_base,                              \
            "tfrecord: the label a file's first class has (TensorFlow's ImageNet files: 1; "     \
            "files counting from 0: 0)");                                                        \
  ABSL_FLAG(int64_t, num_classes, 0,                                                             \
            "encoded images: the classes (0: found by reading every label when the data is "     \
            "opened; give it for a large TFRecord dataset)");                                    \
  ABSL_FLAG(int64_t, data_threads, 0,                                                            \
            "encoded images: decoding threads (0: the worker's share of the cores less one)");   \
  ABSL_FLAG(bool, skip_corrupt, false,                                                           \
            "encoded images: skip and count a damaged record or image instead of failing");      \
  ABSL_FLAG(std::string, data_partition, cohort::TrainOptions().data_partition,                  \
            "which samples each rank reads: samples (every epoch's permutation sliced by rank) " \
            "or files (record files shared out, file f to rank f mod W; each host then needs "   \
            "only its ranks' .rec files beside every .idx)");                                    \
  ABSL_FLAG(std::string, data_dir, "",                                                           \
            "directory of the dataset's files (default /usr/share/datasets/<dataset>)");         \
  ABSL_FLAG(int64_t, batch_size, cohort::TrainOptions().batch_size,                              \
            "images per step (per worker)");                                                     \
  ABSL_FLAG(int64_t, epochs, cohort::TrainOptions().epochs, "passes over the training set");    \
  ABSL_FLAG(int64_t, train_samples, 0,                                                           \
            "train on the first N samples of the training set only (0: all; a quick trial)");     \
  ABSL_FLAG(std::string, optimizer, cohort::TrainOptions().optimizer, "optimizer: sgd or adam"); \
  ABSL_FLAG(double, lr, cohort::TrainOptions().lr, "base learning rate");                        \
  ABSL_FLAG(std::string, lr_schedule, cohort::TrainOptions().lr_schedule,                        \
            "learning-rate schedule: constant, step (x0.1 at 50% and 75% of the epochs), "       \
            "cosine or poly (power 2)");                                                         \
  ABSL_FLAG(double, warmup_epochs, cohort::TrainOptions().warmup_epochs,                         \
            "epochs of linear learning-rate warm-up before the schedule (may be fractional)");   \
  ABSL_FLAG(bool, scale_lr, cohort::TrainOptions().scale_lr,                                     \
            "linear scaling rule: use lr x global batch / 256 as the base learning rate");       \
  ABSL_FLAG(std::string, elastic_lr, cohort::TrainOptions().elastic_lr,                          \
            "an elastic job whose workers changed: keep the learning rate of the workers it "    \
            "started with, or scale it with their number (linear scaling rule)");                \
  ABSL_FLAG(std::string, augment, cohort::TrainOptions().augment,                                \
            "training augmentation: none, flip (random horizontal flip) or crop_flip (random "   \
            "crop with side/8 zero padding, then flip; encoded images: RandomResizedCrop, then " \
            "flip)");                                                                            \
  ABSL_FLAG(double, momentum, cohort::TrainOptions().momentum, "SGD momentum (sgd only)");       \
  ABSL_FLAG(double, wd, cohort::TrainOptions().wd, "weight decay (L2)");                         \
  ABSL_FLAG(std::string, kv_store, cohort::TrainOptions().kv_store,                              \
            "parameter store: local (this process), dist_sync or dist_async (in a job's "        \
            "workers: //services:worker, //tools:launch)");                                      \
  ABSL_FLAG(uint64_t, seed, cohort::TrainOptions().seed,                                         \
            "seed of initialisation, data order and augmentation");                              \
  ABSL_FLAG(int64_t, log_interval, cohort::TrainOptions().log_interval,                          \
            "steps between progress rows");                                                      \
  ABSL_FLAG(std::string, output, cohort::TrainOptions().output,                                  \
            "where to write the trained model (safetensors); empty: don't");                     \
  ABSL_FLAG(std::string, devices, cohort::TrainOptions().devices,                                \
            "compute devices: cpu, cpu:N to split the local batch over N device contexts, or "   \
            "gpu:I (one GPU; builds with the GPU backend: //trainer:train_gpu) (alias --gpus)");  \
  ABSL_FLAG(std::string, precision, cohort::TrainOptions().precision,                            \
            "what a GPU computes in: fp32, tf32, bf16 or fp16 (fp32 master weights in the "      \
            "kvstore; CPUs: fp32)");                                                             \
  ABSL_FLAG(bool, deterministic, cohort::TrainOptions().deterministic,                           \
            "GPUs: only convolution algorithms that give the same bits every run (as PyTorch's " \
            "cudnn.deterministic), at some cost in speed; CPU steps repeat bit for bit anyway"); \
  ABSL_FLAG(bool, overlap, cohort::TrainOptions().overlap,                                       \
            "overlap communication with computation: push each gradient as backward produces "   \
            "it, wait for each layer's values just before its forward (--nooverlap: push all "   \
            "after backward, then wait for all)");                                              \
  ABSL_FLAG(std::string, log_json, "",                                                           \
            "also write the progress rows as JSON lines to this file (rank 0; empty: don't)")

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, dataset);
ABSL_DECLARE_FLAG(std::string, data_dir);
ABSL_DECLARE_FLAG(std::string, eval_dataset);
ABSL_DECLARE_FLAG(int64_t, image_size);
ABSL_DECLARE_FLAG(int64_t, eval_resize);
ABSL_DECLARE_FLAG(double, min_crop_scale);
ABSL_DECLARE_FLAG(int64_t, image_channels);
ABSL_DECLARE_FLAG(std::string, image_mean);
ABSL_DECLARE_FLAG(std::string, image_std);
ABSL_DECLARE_FLAG(int64_t, label_base);
ABSL_DECLARE_FLAG(int64_t, num_classes);
ABSL_DECLARE_FLAG(int64_t, data_threads);
ABSL_DECLARE_FLAG(bool, skip_corrupt);
ABSL_DECLARE_FLAG(std::string, data_partition);
ABSL_DECLARE_FLAG(int64_t, batch_size);
ABSL_DECLARE_FLAG(int64_t, epochs);
ABSL_DECLARE_FLAG(int64_t, train_samples);
ABSL_DECLARE_FLAG(std::string, optimizer);
ABSL_DECLARE_FLAG(double, lr);
ABSL_DECLARE_FLAG(std::string, lr_schedule);
ABSL_DECLARE_FLAG(double, warmup_epochs);
ABSL_DECLARE_FLAG(bool, scale_lr);
ABSL_DECLARE_FLAG(std::string, elastic_lr);
ABSL_DECLARE_FLAG(std::string, augment);
ABSL_DECLARE_FLAG(double, momentum);
ABSL_DECLARE_FLAG(double, wd);
ABSL_DECLARE_FLAG(std::string, kv_store);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(int64_t, log_interval);
ABSL_DECLARE_FLAG(std::string, output);
ABSL_DECLARE_FLAG(std::string, devices);
ABSL_DECLARE_FLAG(std::string, precision);
ABSL_DECLARE_FLAG(bool, deterministic);
ABSL_DECLARE_FLAG(bool, overlap);
ABSL_DECLARE_FLAG(std::string, log_json);

namespace cohort {

// The training flags' values; relative paths resolve against BUILD_WORKING_DIRECTORY (the
// user's directory under `bazel run`) when it is set.
TrainOptions TrainOptionsFromFlags();

}  // namespace cohort

#endif  // COHORT_TRAINER_CLI_TRAIN_FLAGS_H_
