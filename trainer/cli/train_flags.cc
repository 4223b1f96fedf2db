#include "trainer/cli/train_flags.h"

#include <cstdlib>
#include "trainer/cli/args.h"
#include "trainer/data/encoded_images.h"

namespace cohort {
namespace {

// A dataset named by a path (imagefolder:DIR, ...) resolves it as the other paths resolve.
std::string ResolveDatasetPath(const std::string& spec, const std::string& user_dir) {
  const auto [kind, path] = ParseEncodedImagesSpec(spec);
  return kind.empty() ? spec : kind + ResolveUserPath(path, user_dir);
}

}  // namespace

TrainOptions TrainOptionsFromFlags() {
  // Relative paths are relative to where the user ran the command, even under `bazel run`.
  const std::string user_dir = UserDirectory();
  TrainOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.dataset = ResolveDatasetPath(absl::GetFlag(FLAGS_dataset), user_dir);
  o.data_dir = ResolveUserPath(absl::GetFlag(FLAGS_data_dir), user_dir);
  o.eval_dataset = ResolveDatasetPath(absl::GetFlag(FLAGS_eval_dataset), user_dir);
  o.image_size = absl::GetFlag(FLAGS_image_size);
  o.eval_resize = absl::GetFlag(FLAGS_eval_resize);
  o.min_crop_scale = absl::GetFlag(FLAGS_min_crop_scale);
  o.image_channels = absl::GetFlag(FLAGS_image_channels);
  o.image_mean = absl::GetFlag(FLAGS_image_mean);
  o.image_std = absl::GetFlag(FLAGS_image_std);
  o.label_base = absl::GetFlag(FLAGS_label_base);
  o.num_classes = absl::GetFlag(FLAGS_num_classes);
  o.data_threads = absl::GetFlag(FLAGS_data_threads);
  o.skip_corrupt = absl::GetFlag(FLAGS_skip_corrupt);
  o.data_partition = absl::GetFlag(FLAGS_data_partition);
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.train_samples = absl::GetFlag(FLAGS_train_samples);
  o.optimizer = absl::GetFlag(FLAGS_optimizer);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  o.warmup_epochs = absl::GetFlag(FLAGS_warmup_epochs);
  o.scale_lr = absl::GetFlag(FLAGS_scale_lr);
  o.elastic_lr = absl::GetFlag(FLAGS_elastic_lr);
  o.augment = absl::GetFlag(FLAGS_augment);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.wd = absl::GetFlag(FLAGS_wd);
  o.kv_store = absl::GetFlag(FLAGS_kv_store);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.log_interval = absl::GetFlag(FLAGS_log_interval);
  o.output = ResolveUserPath(absl::GetFlag(FLAGS_output), user_dir);
  o.devices = absl::GetFlag(FLAGS_devices);
  o.precision = absl::GetFlag(FLAGS_precision);
  o.deterministic = absl::GetFlag(FLAGS_deterministic);
  o.overlap = absl::GetFlag(FLAGS_overlap);
  o.log_json = ResolveUserPath(absl::GetFlag(FLAGS_log_json), user_dir);
  return o;
}

}  // namespace cohort
