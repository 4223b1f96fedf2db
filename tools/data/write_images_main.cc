// Writes a dataset Cohort holds in memory (Fashion-MNIST, MNIST, CIFAR-10, synthetic) as JPEG
// class folders with im2rec lists, the way image datasets are kept, to try the image path
// (--dataset imagefolder:, or packed to records) without ImageNet at hand:
//   bazel run //tools/data:write_images -- --dataset=fashion-mnist --out=DIR
// writes DIR/train/<class>/<n>.jpg with DIR/train.lst, and DIR/val likewise from the test split.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "trainer/cli/args.h"
#include "trainer/data/dataset.h"
#include "trainer/data/image_export.h"

ABSL_FLAG(std::string, dataset, "fashion-mnist", "the dataset: fashion-mnist, mnist, cifar10, ...");
ABSL_FLAG(std::string, data_dir, "", "its files (default /usr/share/datasets/<dataset>)");
ABSL_FLAG(std::string, out, "", "the folder to write train/, val/, train.lst and val.lst in");
ABSL_FLAG(int, quality, 95, "JPEG quality, 1-100");
ABSL_FLAG(int64_t, train_samples, 0, "the first N training images only (0: all)");
ABSL_FLAG(int64_t, test_samples, 0, "the first N test images only (0: all)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Writes a dataset as JPEG class folders with im2rec lists.\n"
      "  bazel run //tools/data:write_images -- --dataset=fashion-mnist --out=DIR");
  if (!cohort::ParseCanonicalCommandLine("write_images", argc, argv, {})) return 2;
  const std::string user_dir = cohort::UserDirectory();
  const std::string out = cohort::ResolveUserPath(absl::GetFlag(FLAGS_out), user_dir);
  if (out.empty()) {
    std::cerr << "write_images: error: give --out=DIR (see --help)\n";
    return 2;
  }
  absl::StatusOr<cohort::TrainTestData> data = cohort::LoadDataset(
      absl::GetFlag(FLAGS_dataset),
      cohort::ResolveUserPath(absl::GetFlag(FLAGS_data_dir), user_dir));
  if (!data.ok()) {
    std::cerr << "write_images: error: " << data.status().message() << "\n";
    return 1;
  }
  const int quality = absl::GetFlag(FLAGS_quality);
  for (const auto& [split, name, limit] :
       {std::make_tuple(&data->train, "train", absl::GetFlag(FLAGS_train_samples)),
        std::make_tuple(&data->test, "val", absl::GetFlag(FLAGS_test_samples))}) {
    const absl::Status written =
        cohort::WriteJpegFolder(*split, out + "/" + name, quality, limit, std::cout);
    if (!written.ok()) {
      std::cerr << "write_images: error: " << written.message() << "\n";
      return 1;
    }
  }
  std::cout << "write_images: train with --dataset=imagefolder:" << out
            << " (class folders) or imagefolder:" << out << "/train.lst (in sample order)\n";
  return 0;
}
