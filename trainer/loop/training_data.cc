#include "trainer/loop/training_data.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "trainer/base/status_macros.h"
#include "trainer/data/encoded_images.h"
#include "trainer/data/encoded_source.h"
#include "trainer/loop/devices.h"
#include "trainer/models/models.h"

namespace cohort {
namespace {

// "0.485,0.456,0.406": one value per channel, or one for all of them.
absl::StatusOr<std::array<float, 3>> ParseChannelValues(const char* flag,
                                                        const std::string& text, int channels,
                                                        bool positive) {
  std::vector<float> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    float v = 0;
    if (!absl::SimpleAtof(part, &v) || (positive && !(v > 0))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "=", text, ": expected ", channels, " comma-separated numbers",
          positive ? " above 0" : "", " (one per channel, or one for all)"));
    }
    values.push_back(v);
  }
  if (values.size() != 1 && values.size() != static_cast<size_t>(channels)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", text, ": ", values.size(),
                                                   " values for ", channels, " channels"));
  }
  std::array<float, 3> out{};
  for (int c = 0; c < channels; ++c) out[c] = values[values.size() == 1 ? 0 : c];
  return out;
}

absl::StatusOr<ImageTransformOptions> TransformOptions(const TrainOptions& o) {
  if (o.image_channels != 1 && o.image_channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--image_channels=", o.image_channels, ": expected 1 (grey) or 3 (RGB)"));
  }
  if (o.image_size < 1 || o.eval_resize < o.image_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--image_size=", o.image_size, " --eval_resize=", o.eval_resize,
        ": the evaluation resize must be at least the image size (which is at least 1)"));
  }
  if (!(o.min_crop_scale > 0 && o.min_crop_scale <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min_crop_scale=", o.min_crop_scale, ": must be in (0, 1]"));
  }
  ImageTransformOptions t;
  t.channels = static_cast<int>(o.image_channels);
  t.train_size = t.eval_size = static_cast<int>(o.image_size);
  t.eval_resize = static_cast<int>(o.eval_resize);
  t.min_scale = o.min_crop_scale;
  t.random_resized_crop = o.augment == "crop_flip";
  t.horizontal_flip = o.augment == "flip" || o.augment == "crop_flip";
  ASSIGN_OR_RETURN(t.mean, ParseChannelValues("image_mean", o.image_mean, t.channels, false));
  ASSIGN_OR_RETURN(t.std, ParseChannelValues("image_std", o.image_std, t.channels, true));
  return t;
}

absl::StatusOr<TrainingData> OpenEncoded(const TrainOptions& options, std::ostream& out) {
  const bool by_files = options.data_partition == "files";
  if (by_files && options.train_samples > 0) {
    return absl::InvalidArgumentError(
        "--train_samples cannot be combined with --data_partition=files (whole files are shared)");
  }
  ASSIGN_OR_RETURN(const DatasetSplits splits,
                   ResolveSplits(options.dataset, options.eval_dataset));
  ASSIGN_OR_RETURN(const ImageTransformOptions transform, TransformOptions(options));
  EncodedImagesOptions read;
  read.label_base = options.label_base;
  read.num_classes = static_cast<int>(options.num_classes);
  read.rec_may_be_absent = by_files;
  ASSIGN_OR_RETURN(std::unique_ptr<EncodedImages> train, OpenEncodedImages(splits.train, read));
  TrainingData data;
  data.partition.size = train->size();
  if (by_files) {
    data.partition.records_per_file = train->RecordsPerFile();
    if (data.partition.records_per_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_partition=files: ", train->name(), " is not in record files (pack it with "
          "//tools/data:pack_records)"));
    }
  }
  read.rec_may_be_absent = false;
  // The evaluation split holds the training split's classes (it may miss some).
  read.num_classes = train->num_classes();
  ASSIGN_OR_RETURN(std::unique_ptr<EncodedImages> test, OpenEncodedImages(splits.eval, read));
  EncodedSourceOptions source;
  source.transform = transform;
  source.threads = options.data_threads > 0
                       ? static_cast<int>(options.data_threads)
                       : std::max(1, ProcessComputeThreads() - 1);
  source.skip_corrupt = options.skip_corrupt;
  source.limit = by_files ? 0 : options.train_samples;
  data.train = std::make_unique<EncodedSource>(std::move(train), source, &out);
  source.train = false;
  source.limit = 0;
  data.test = std::make_unique<EncodedSource>(std::move(test), source, &out);
  return data;
}

}  // namespace

absl::StatusOr<TrainingData> OpenTrainingData(const TrainOptions& options, bool lead,
                                              std::ostream& out) {
  if (options.data_partition != "samples" && options.data_partition != "files") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data_partition=", options.data_partition, ": expected samples or files"));
  }
  if (IsEncodedImagesSpec(options.dataset)) return OpenEncoded(options, out);
  if (options.data_partition == "files") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data_partition=files: ", options.dataset, " is held in memory, not in record files"));
  }
  ASSIGN_OR_RETURN(TrainTestData data, LoadDataset(options.dataset, options.data_dir));
  if (options.train_samples > 0 && options.train_samples < data.train.size()) {
    const size_t sample_bytes = static_cast<size_t>(data.train.sample_shape.numel());
    data.train.labels.resize(static_cast<size_t>(options.train_samples));
    data.train.pixels.resize(static_cast<size_t>(options.train_samples) * sample_bytes);
  }
  const Normalization norm = ComputeNormalization(data.train);
  if (const int64_t side = ModelImageSize(options.model);
      side > data.train.sample_shape[1] || side > data.train.sample_shape[2]) {
    if (lead) {
      out << absl::StrFormat("train: zero-padding %s images to %dx%d for %s\n",
                             data.train.sample_shape.ToString(), side, side, options.model);
    }
    ASSIGN_OR_RETURN(data.train, PadImages(data.train, side, side));
    ASSIGN_OR_RETURN(data.test, PadImages(data.test, side, side));
  }
  ASSIGN_OR_RETURN(const Augmentation augmentation,
                   ParseAugment(options.augment, data.train.sample_shape[1]));
  TrainingData sources;
  sources.train = std::make_unique<InMemorySource>(std::move(data.train), norm, augmentation);
  sources.test = std::make_unique<InMemorySource>(std::move(data.test), norm, Augmentation{});
  sources.partition.size = sources.train->size();
  return sources;
}

}  // namespace cohort
