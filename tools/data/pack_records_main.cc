// Packs an image folder (torchvision's ImageFolder layout) or an im2rec list into RecordIO
// shards with their indexes, as im2rec writes them, or into TFRecord files:
//   bazel run //tools/data:pack_records -- --images=DIR --prefix=OUT/train --shard_mb=256
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "trainer/cli/args.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/record_packer.h"

ABSL_FLAG(std::string, images, "", "the image folder: one sub-folder of images per class");
ABSL_FLAG(std::string, list, "",
          "an im2rec .lst file instead of a folder's classes (paths relative to --images)");
ABSL_FLAG(std::string, prefix, "",
          "the shards' prefix: PREFIX-00000.rec with PREFIX-00000.idx, ... (or .tfrecord)");
ABSL_FLAG(std::string, format, "recordio",
          "recordio (im2rec's .rec + .idx; MXNet reads them too) or tfrecord (tf.train.Example "
          "records as TensorFlow's ImageNet script writes them)");
ABSL_FLAG(int64_t, label_base, 1, "tfrecord: the label stored for class 0 (TensorFlow's: 1)");
ABSL_FLAG(int64_t, shard_mb, 256, "megabytes a shard holds at least before the next begins");
ABSL_FLAG(uint64_t, seed, 0, "the records' shuffled order (the same seed, the same files)");
ABSL_FLAG(bool, shuffle, true, "shuffle the records by --seed (--noshuffle: the list's order)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Packs an image folder into RecordIO shards (MXNet reads them too) or TFRecord files.\n"
      "  bazel run //tools/data:pack_records -- --images=DIR --prefix=OUT/train");
  if (!cohort::ParseCanonicalCommandLine("pack_records", argc, argv, {})) return 2;
  const std::string user_dir = cohort::UserDirectory();
  cohort::PackOptions options;
  options.root = cohort::ResolveUserPath(absl::GetFlag(FLAGS_images), user_dir);
  options.prefix = cohort::ResolveUserPath(absl::GetFlag(FLAGS_prefix), user_dir);
  options.shard_bytes = absl::GetFlag(FLAGS_shard_mb) << 20;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.shuffle = absl::GetFlag(FLAGS_shuffle);
  options.label_base = absl::GetFlag(FLAGS_label_base);
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "recordio" && format != "tfrecord") {
    std::cerr << "pack_records: error: --format=" << format << ": expected recordio or tfrecord\n";
    return 2;
  }
  options.format = format == "recordio" ? cohort::RecordFormat::kRecordIO
                                        : cohort::RecordFormat::kTFRecord;
  if (options.root.empty() || options.prefix.empty()) {
    std::cerr << "pack_records: error: give --images=DIR and --prefix=PREFIX (see --help)\n";
    return 2;
  }
  const std::string list_file = absl::GetFlag(FLAGS_list);
  absl::StatusOr<cohort::ImageList> list =
      list_file.empty() ? cohort::ListImageFolder(options.root)
                        : cohort::ReadImageListFile(cohort::ResolveUserPath(list_file, user_dir));
  if (!list.ok()) {
    std::cerr << "pack_records: error: " << list.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<std::string>> shards = cohort::PackRecords(*list, options, std::cout);
  if (!shards.ok()) {
    std::cerr << "pack_records: error: " << shards.status().message() << "\n";
    return 1;
  }
  std::cout << "pack_records: " << list->images.size() << " images of " << list->classes.size()
            << " classes in " << shards->size() << " shards, " << options.prefix
            << (format == "recordio" ? "-*.rec with their .idx (--dataset=recordio:"
                                     : "-*.tfrecord (--dataset=tfrecord:")
            << options.prefix << (format == "recordio" ? ")\n" : "-*.tfrecord)\n");
  return 0;
}
