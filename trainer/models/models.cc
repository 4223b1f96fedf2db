#include "trainer/models/models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort {
namespace {

constexpr int kCifarDepths[] = {20, 32, 44, 56, 110};

// The depth of a CIFAR ResNet name ("resnet56" → 56), or 0.
int CifarResnetDepth(const std::string& name) {
  for (int depth : kCifarDepths) {
    if (name == absl::StrCat("resnet", depth)) return depth;
  }
  return 0;
}

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the shortcut subsampling and
// zero-padding channels where the block changes the size.
void CifarBasicBlock(ModelBuilder& b, const std::string& p, int64_t in_planes, int64_t planes,
                     int stride) {
  const int x = b.current();
  b.Conv2d(p + ".conv1", planes, 3, stride, 1, /*bias=*/false).BatchNorm(p + ".bn1").Relu(p + ".relu1");
  b.Conv2d(p + ".conv2", planes, 3, 1, 1, /*bias=*/false).BatchNorm(p + ".bn2");
  const int main = b.current();
  int shortcut = x;
  if (stride != 1 || in_planes != planes) {
    b.From(x).SubsamplePad(p + ".shortcut", stride, (planes - in_planes) / 2);
    shortcut = b.current();
  }
  b.From(main).Add(p + ".add", shortcut).Relu(p + ".relu2");
}

void CifarResnet(ModelBuilder& b, int depth, int num_classes) {
  const int blocks = (depth - 2) / 6;
  b.Conv2d("conv1", 16, 3, 1, 1, /*bias=*/false).BatchNorm("bn1").Relu("relu");
  int64_t in_planes = 16;
  for (int stage = 1; stage <= 3; ++stage) {
    const int64_t planes = 16 << (stage - 1);
    for (int i = 0; i < blocks; ++i) {
      CifarBasicBlock(b, absl::StrCat("layer", stage, ".", i), in_planes, planes,
                      stage > 1 && i == 0 ? 2 : 1);
      in_planes = planes;
    }
  }
  b.GlobalAvgPool("avgpool").Linear("fc", num_classes);
}

// 1x1 reduce, 3x3 (carrying the stride), 1x1 expand ×4, plus a projection shortcut where
// the size changes.
void Bottleneck(ModelBuilder& b, const std::string& p, int64_t in_planes, int64_t width,
                int stride) {
  const int x = b.current();
  b.Conv2d(p + ".conv1", width, 1, 1, 0, false).BatchNorm(p + ".bn1").Relu(p + ".relu1");
  b.Conv2d(p + ".conv2", width, 3, stride, 1, false).BatchNorm(p + ".bn2").Relu(p + ".relu2");
  b.Conv2d(p + ".conv3", width * 4, 1, 1, 0, false).BatchNorm(p + ".bn3");
  const int main = b.current();
  int shortcut = x;
  if (stride != 1 || in_planes != width * 4) {
    b.From(x).Conv2d(p + ".downsample.0", width * 4, 1, stride, 0, false);
    b.BatchNorm(p + ".downsample.1");
    shortcut = b.current();
  }
  b.From(main).Add(p + ".add", shortcut).Relu(p + ".relu3");
}

void Resnet50(ModelBuilder& b, int num_classes) {
  b.Conv2d("conv1", 64, 7, 2, 3, false).BatchNorm("bn1").Relu("relu").MaxPool2d("maxpool", 3, 2, 1);
  const int blocks[] = {3, 4, 6, 3};
  int64_t in_planes = 64;
  for (int stage = 1; stage <= 4; ++stage) {
    const int64_t width = 64 << (stage - 1);
    for (int i = 0; i < blocks[stage - 1]; ++i) {
      Bottleneck(b, absl::StrCat("layer", stage, ".", i), in_planes, width,
                 stage > 1 && i == 0 ? 2 : 1);
      in_planes = width * 4;
    }
  }
  b.GlobalAvgPool("avgpool").Linear("fc", num_classes);
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names{"lenet", "mlp"};
  for (int depth : kCifarDepths) names.push_back(absl::StrCat("resnet", depth));
  names.push_back("resnet50");
  return names;
}

int64_t ModelImageSize(const std::string& name) {
  if (CifarResnetDepth(name) > 0) return 32;
  if (name == "resnet50") return 224;
  return 0;
}

BenchmarkSample BenchmarkSampleFor(const std::string& name) {
  const int64_t side = ModelImageSize(name);
  if (side == 0) return {Shape{1, 28, 28}, 10};
  return {Shape{3, side, side}, side == 224 ? 1000 : 10};
}

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name, Backend* backend,
                                                  const Shape& input_shape, int num_classes) {
  ModelBuilder b(backend, name, input_shape);
  if (name == "lenet") {
    b.Conv2d("conv1", 6, 5, 1, 2).Relu("relu1").MaxPool2d("pool1", 2, 2);
    b.Conv2d("conv2", 16, 5, 1, 0).Relu("relu2").MaxPool2d("pool2", 2, 2);
    b.Flatten("flatten").Linear("fc1", 120).Relu("relu3").Linear("fc2", 84).Relu("relu4");
    b.Linear("fc3", num_classes);
  } else if (name == "mlp") {
    b.Flatten("flatten").Linear("fc1", 256).Relu("relu1").Linear("fc2", 128).Relu("relu2");
    b.Linear("fc3", num_classes);
  } else if (const int depth = CifarResnetDepth(name); depth > 0) {
    CifarResnet(b, depth, num_classes);
  } else if (name == "resnet50") {
    Resnet50(b, num_classes);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown model '", name, "'; known models: ",
                                                   absl::StrJoin(ModelNames(), ", ")));
  }
  return b.Build();
}

}  // namespace cohort
