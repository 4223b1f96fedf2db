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

// torchvision's BasicConv2d: a convolution without bias, batch norm with eps 0.001, ReLU.
void BasicConv(ModelBuilder& b, const std::string& p, int64_t channels, int kernel, int stride = 1,
               int padding = 0) {
  b.Conv2d(p + ".conv", static_cast<int>(channels), kernel, stride, padding, /*bias=*/false);
  b.BatchNorm(p + ".bn", 1e-3f).Relu(p + ".relu");
}

// Four branches of the block's input, concatenated along channels: 1x1; 1x1 then 3x3; 1x1 then
// 3x3 again (torchvision's "5x5" branch, kept 3x3 as its weights have it); 3x3 max pooling
// (stride 1, ceil_mode as torchvision's, which changes nothing at stride 1) then 1x1.
void Inception(ModelBuilder& b, const std::string& p, int64_t ch1x1, int64_t ch3x3red,
               int64_t ch3x3, int64_t ch5x5red, int64_t ch5x5, int64_t pool_proj) {
  const int x = b.current();
  BasicConv(b, p + ".branch1", ch1x1, 1);
  const int branch1 = b.current();
  BasicConv(b.From(x), p + ".branch2.0", ch3x3red, 1);
  BasicConv(b, p + ".branch2.1", ch3x3, 3, 1, 1);
  const int branch2 = b.current();
  BasicConv(b.From(x), p + ".branch3.0", ch5x5red, 1);
  BasicConv(b, p + ".branch3.1", ch5x5, 3, 1, 1);
  const int branch3 = b.current();
  b.From(x).MaxPool2d(p + ".branch4.0", 3, 1, 1, /*ceil_mode=*/true);
  BasicConv(b, p + ".branch4.1", pool_proj, 1);
  b.Concat(p + ".cat", {branch1, branch2, branch3, b.current()});
}

void Googlenet(ModelBuilder& b, int num_classes) {
  BasicConv(b, "conv1", 64, 7, 2, 3);
  b.MaxPool2d("maxpool1", 3, 2, 0, /*ceil_mode=*/true);
  BasicConv(b, "conv2", 64, 1);
  BasicConv(b, "conv3", 192, 3, 1, 1);
  b.MaxPool2d("maxpool2", 3, 2, 0, /*ceil_mode=*/true);
  Inception(b, "inception3a", 64, 96, 128, 16, 32, 32);
  Inception(b, "inception3b", 128, 128, 192, 32, 96, 64);
  b.MaxPool2d("maxpool3", 3, 2, 0, /*ceil_mode=*/true);
  Inception(b, "inception4a", 192, 96, 208, 16, 48, 64);
  Inception(b, "inception4b", 160, 112, 224, 24, 64, 64);
  Inception(b, "inception4c", 128, 128, 256, 24, 64, 64);
  Inception(b, "inception4d", 112, 144, 288, 32, 64, 64);
  Inception(b, "inception4e", 256, 160, 320, 32, 128, 128);
  b.MaxPool2d("maxpool4", 2, 2, 0, /*ceil_mode=*/true);
  Inception(b, "inception5a", 256, 160, 320, 32, 128, 128);
  Inception(b, "inception5b", 384, 192, 384, 48, 128, 128);
  b.GlobalAvgPool("avgpool").Dropout("dropout", 0.2f).Linear("fc", num_classes);
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names{"lenet", "mlp"};
  for (int depth : kCifarDepths) names.push_back(absl::StrCat("resnet", depth));
  names.push_back("resnet50");
  names.push_back("googlenet");
  return names;
}

int64_t ModelImageSize(const std::string& name) {
  if (CifarResnetDepth(name) > 0) return 32;
  if (name == "resnet50" || name == "googlenet") return 224;
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
  } else if (name == "googlenet") {
    Googlenet(b, num_classes);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown model '", name, "'; known models: ",
                                                   absl::StrJoin(ModelNames(), ", ")));
  }
  return b.Build();
}

}  // namespace cohort
