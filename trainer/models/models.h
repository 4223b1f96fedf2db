#ifndef COHORT_TRAINER_MODELS_MODELS_H_
#define COHORT_TRAINER_MODELS_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/nn/model.h"

namespace cohort {

// The model names --model accepts.
std::vector<std::string> ModelNames();

// The image side a model is designed for (32 for the CIFAR ResNets, 224 for ResNet-50 and
// GoogLeNet), or 0 when any size fits. The trainer pads smaller images up to it.
int64_t ModelImageSize(const std::string& name);

// What a model is benchmarked on, with synthetic data: Fashion-MNIST's shape (1, 28, 28) and 10
// classes for the models of any size, CIFAR-10's for the CIFAR ResNets, ImageNet's with 1000
// classes for ResNet-50 and GoogLeNet.
struct BenchmarkSample {
  Shape shape;  // (C, H, W)
  int num_classes = 10;
};
BenchmarkSample BenchmarkSampleFor(const std::string& name);

// Builds a named model on the backend for samples of input_shape (C, H, W) and num_classes.
// Parameters are zero until Model::InitParameters. Unknown names are an InvalidArgument
// listing the known ones. Layer names follow PyTorch's, so the export loads there unchanged.
//   lenet: LeNet-5 with ReLU and max pooling: conv1 6@5x5 pad 2, pool 2, conv2 16@5x5, pool 2,
//          fc1 120, fc2 84, fc3 num_classes.
//   mlp:   flatten, fc1 256, fc2 128, fc3 num_classes, ReLU between.
//   resnet20/32/44/56/110: the CIFAR ResNets of He et al. 2016 (depth 6n+2): conv1 16@3x3,
//          three stages of n basic blocks (16, 32, 64 channels; stride 2 entering stages 2
//          and 3) with parameter-free "option A" shortcuts, global average pool, fc.
//          ResNet-20 has 269,722 parameters for 3-channel input and 10 classes.
//   resnet50: torchvision's ResNet-50 (v1.5: stride on the 3x3 convolution), bottleneck
//          blocks 3-4-6-3 with projection shortcuts (downsample.0/.1); 25,557,032 parameters
//          for 3-channel input and 1000 classes.
//   googlenet: torchvision's GoogLeNet (Inception v1 with batch norm, eps 0.001) without the
//          auxiliary classifiers or the input transform: nine Inception blocks (inception3a ...
//          inception5b, branches branch1 ... branch4, each convolution a "<name>.conv" without
//          bias, "<name>.bn" and ReLU), max pools with ceil_mode, global average pool, dropout
//          0.2, fc; 6,624,904 parameters for 3-channel input and 1000 classes. Any side from 32
//          up fits.
absl::StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name, Backend* backend,
                                                  const Shape& input_shape, int num_classes);

}  // namespace cohort

#endif  // COHORT_TRAINER_MODELS_MODELS_H_
