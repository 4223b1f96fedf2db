// model_tensors: the tensors a model's workers push and pull each step, as the kvstore keys
// them (every parameter in model order, then the model's state packed into one auxiliary key),
// for //tools/bench:scaling_model.
//   bazel run //tools/bench:model_tensors -- --model resnet50
// Prints one JSON object: {"model": NAME, "elements": [n0, n1, ...]}.

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "trainer/cli/args.h"
#include "trainer/models/models.h"
#include "trainer/ops/cpu/onednn_backend.h"

ABSL_FLAG(std::string, model, "resnet50", "the model (as the trainer's --model)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Prints the elements of each tensor a model's workers push.");
  if (!cohort::ParseCanonicalCommandLine("model_tensors", argc, argv, {})) return 2;
  const std::string name = absl::GetFlag(FLAGS_model);
  cohort::OnednnBackend backend;
  const cohort::BenchmarkSample sample = cohort::BenchmarkSampleFor(name);
  auto model = cohort::BuildModel(name, &backend, sample.shape, sample.num_classes);
  if (!model.ok()) {
    std::cerr << "model_tensors: error: " << model.status().message() << "\n";
    return 2;
  }
  std::vector<int64_t> elements;
  for (const cohort::Parameter* p : (*model)->parameters()) elements.push_back(p->value.numel());
  int64_t state = 0;
  for (const cohort::StateTensor& t : (*model)->state()) state += t.value->numel();
  if (state > 0) elements.push_back(state);
  std::cout << "{\"model\": \"" << name << "\", \"elements\": [" << absl::StrJoin(elements, ", ")
            << "]}\n";
  return 0;
}
