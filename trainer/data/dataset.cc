#include "trainer/data/dataset.h"

#include <unistd.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/base/status_macros.h"
#include "trainer/data/idx.h"

namespace cohort {
namespace {

// "<prefix>-images-idx3-ubyte.gz", or the uncompressed name when only that exists.
std::string IdxPath(const std::string& dir, const std::string& prefix, const std::string& kind) {
  const std::string base = absl::StrCat(dir, "/", prefix, "-", kind);
  const std::string gz = base + ".gz";
  return access(gz.c_str(), F_OK) != 0 && access(base.c_str(), F_OK) == 0 ? base : gz;
}

}  // namespace

std::vector<std::string> DatasetNames() { return {"fashion-mnist", "mnist"}; }

std::string DefaultDataDir(const std::string& dataset) {
  return "/usr/share/datasets/" + dataset;
}

absl::StatusOr<ImageDataset> LoadIdxImages(const std::string& dir, const std::string& prefix,
                                           int num_classes, const std::string& name) {
  const std::string images_path = IdxPath(dir, prefix, "images-idx3-ubyte");
  const std::string labels_path = IdxPath(dir, prefix, "labels-idx1-ubyte");
  ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path, 3));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path, 1));
  if (images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, " holds ", images.dims[0],
                                                   " images but ", labels_path, " holds ",
                                                   labels.dims[0], " labels"));
  }
  ImageDataset d;
  d.name = name;
  d.sample_shape = Shape{1, images.dims[1], images.dims[2]};
  d.num_classes = num_classes;
  d.pixels = std::move(images.data);
  d.labels.reserve(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": label ", int{labels.data[i]},
                                                     " of sample ", i, " is outside [0, ",
                                                     num_classes, ")"));
    }
    d.labels.push_back(labels.data[i]);
  }
  return d;
}

absl::StatusOr<TrainTestData> LoadDataset(const std::string& dataset, const std::string& data_dir) {
  if (dataset != "fashion-mnist" && dataset != "mnist") {
    return absl::InvalidArgumentError(absl::StrCat("unknown dataset '", dataset,
                                                   "'; known datasets: ",
                                                   absl::StrJoin(DatasetNames(), ", ")));
  }
  const std::string dir = data_dir.empty() ? DefaultDataDir(dataset) : data_dir;
  if (access(dir.c_str(), F_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "dataset directory ", dir, " does not exist; ",
        dataset == "fashion-mnist" ? "run tools/install_deps.sh (Debian dataset-fashion-mnist) or "
                                   : "",
        "pass --data_dir with the IDX files"));
  }
  TrainTestData d;
  ASSIGN_OR_RETURN(d.train, LoadIdxImages(dir, "train", 10, dataset + " train"));
  ASSIGN_OR_RETURN(d.test, LoadIdxImages(dir, "t10k", 10, dataset + " test"));
  if (d.train.sample_shape != d.test.sample_shape) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": train images are ",
                                                   d.train.sample_shape.ToString(),
                                                   ", test images ", d.test.sample_shape.ToString()));
  }
  return d;
}

Normalization ComputeNormalization(const ImageDataset& data) {
  double sum = 0, sum2 = 0;
  for (uint8_t p : data.pixels) {
    const double v = p / 255.0;
    sum += v;
    sum2 += v * v;
  }
  const double n = static_cast<double>(data.pixels.size());
  const double mean = sum / n;
  return {static_cast<float>(mean), static_cast<float>(std::sqrt(sum2 / n - mean * mean))};
}

void GatherBatch(const ImageDataset& data, absl::Span<const int64_t> indices,
                 const Normalization& norm, Tensor* images, Tensor* labels) {
  const int64_t b = static_cast<int64_t>(indices.size());
  const Shape& s = data.sample_shape;
  images->Resize(Shape{b, s[0], s[1], s[2]});
  labels->Resize(Shape{b});
  const int64_t per = s.numel();
  // One table for the 256 byte values: the normalisation is the same for every pixel.
  float table[256];
  for (int v = 0; v < 256; ++v) table[v] = (v / 255.0f - norm.mean) / norm.std;
  float* x = images->data<float>();
  for (int64_t i = 0; i < b; ++i) {
    const uint8_t* src = data.pixels.data() + indices[i] * per;
    for (int64_t j = 0; j < per; ++j) x[i * per + j] = table[src[j]];
    labels->data<int32_t>()[i] = data.labels[indices[i]];
  }
}

}  // namespace cohort
