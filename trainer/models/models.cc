#include "trainer/models/models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort {

std::vector<std::string> ModelNames() { return {"lenet", "mlp"}; }

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
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown model '", name, "'; known models: ",
                                                   absl::StrJoin(ModelNames(), ", ")));
  }
  return b.Build();
}

}  // namespace cohort
