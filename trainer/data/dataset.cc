#include "trainer/data/dataset.h"

#include <unistd.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/base/status_macros.h"
#include "trainer/data/augment.h"
#include "trainer/data/cifar.h"
#include "trainer/data/idx.h"
#include "trainer/data/synthetic.h"

namespace cohort {
namespace {

// "<prefix>-images-idx3-ubyte.gz", or the uncompressed name when only that exists.
std::string IdxPath(const std::string& dir, const std::string& prefix, const std::string& kind) {
  const std::string base = absl::StrCat(dir, "/", prefix, "-", kind);
  const std::string gz = base + ".gz";
  return access(gz.c_str(), F_OK) != 0 && access(base.c_str(), F_OK) == 0 ? base : gz;
}

}  // namespace

std::vector<std::string> DatasetNames() {
  return {"cifar10",           "fashion-mnist",      "mnist",
          "synthetic-cifar10", "synthetic-imagenet", "synthetic:CxHxW:K"};
}

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
  if (IsSyntheticName(dataset)) return LoadSyntheticData(dataset);
  if (dataset != "cifar10" && dataset != "fashion-mnist" && dataset != "mnist") {
    return absl::InvalidArgumentError(absl::StrCat("unknown dataset '", dataset,
                                                   "'; known datasets: ",
                                                   absl::StrJoin(DatasetNames(), ", ")));
  }
  const std::string dir = data_dir.empty() ? DefaultDataDir(dataset) : data_dir;
  if (access(dir.c_str(), F_OK) != 0) {
    const char* how =
        dataset == "cifar10"
            ? "download the CIFAR-10 binary version (cifar-10-binary.tar.gz), unpack it and pass "
              "--data_dir"
        : dataset == "fashion-mnist"
            ? "run tools/install_deps.sh (Debian dataset-fashion-mnist) or pass --data_dir with "
              "the IDX files"
            : "pass --data_dir with the IDX files";
    return absl::NotFoundError(
        absl::StrCat("dataset directory ", dir, " does not exist; ", how));
  }
  if (dataset == "cifar10") return LoadCifar10(dir);
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

absl::StatusOr<ImageDataset> PadImages(const ImageDataset& data, int64_t height, int64_t width) {
  const int64_t c = data.sample_shape[0], h = data.sample_shape[1], w = data.sample_shape[2];
  const int64_t dh = height - h, dw = width - w;
  if (dh < 0 || dw < 0 || dh % 2 != 0 || dw % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot pad the ", h, "x", w, " images of ", data.name, " to ", height, "x", width,
        ": padding adds the same number of pixels on every side, so the target must be larger "
        "by an even number in each dimension"));
  }
  ImageDataset out;
  out.name = data.name;
  out.sample_shape = Shape{c, height, width};
  out.num_classes = data.num_classes;
  out.labels = data.labels;
  out.pixels.assign(static_cast<size_t>(data.size() * out.sample_shape.numel()), 0);
  const int64_t top = dh / 2, left = dw / 2;
  const uint8_t* src = data.pixels.data();
  uint8_t* dst = out.pixels.data();
  for (int64_t plane = 0; plane < data.size() * c; ++plane) {
    for (int64_t y = 0; y < h; ++y) {
      std::memcpy(dst + (plane * height + top + y) * width + left, src + (plane * h + y) * w,
                  static_cast<size_t>(w));
    }
  }
  return out;
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

void ResizeBatch(const Shape& sample, int64_t b, Tensor* images, Tensor* labels) {
  const Shape& is = images->shape();
  if (is.rank() != 4 || is[0] != b || is[1] != sample[0] || is[2] != sample[1] ||
      is[3] != sample[2]) {
    images->Resize(Shape{b, sample[0], sample[1], sample[2]});
  }
  if (labels->shape().rank() != 1 || labels->shape()[0] != b) labels->Resize(Shape{b});
}

PixelTable::PixelTable(const Normalization& norm) {
  for (int v = 0; v < 256; ++v) value[v] = (v / 255.0f - norm.mean) / norm.std;
}

void GatherBatch(const ImageDataset& data, absl::Span<const int64_t> indices,
                 const Normalization& norm, Tensor* images, Tensor* labels) {
  GatherBatch(data, indices, norm, EpochAugmentation{}, images, labels);
}

}  // namespace cohort
