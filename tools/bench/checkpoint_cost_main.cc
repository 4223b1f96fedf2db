// checkpoint_cost: what checkpointing costs the shards of a model (docs/benchmarks.md).
//   bazel run -c opt //tools/bench:checkpoint_cost -- [--model=resnet50] [--shards=2]
// Builds the model's parameters, splits them into 1 MiB parts over the shards as a job does,
// and runs one worker's dist_sync steps (SGD with momentum) through plain shards and through
// shards that checkpoint every other step into --dir. Prints the median time of a step's
// updates on every shard with and without checkpoints (the copy of each part as it reaches
// the step, with the writer threads writing meanwhile), each checkpoint's size and write time
// (the writer's own lines), and the time to find, verify and load the newest checkpoint.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/flags/flag.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "services/shard/shard_checkpointer.h"
#include "services/shard/shard_core.h"
#include "trainer/cli/args.h"
#include "trainer/kvstore/partition.h"
#include "trainer/models/models.h"
#include "trainer/ops/cpu/onednn_backend.h"

ABSL_FLAG(std::string, model, "resnet50", "model whose parameters are checkpointed");
ABSL_FLAG(int, classes, 1000, "classes of the model's last layer");
ABSL_FLAG(int, shards, 2, "parameter shards");
ABSL_FLAG(int, steps, 16,
          "steps timed with and without checkpoints (a checkpoint every other; in 4 rounds)");
ABSL_FLAG(std::string, dir, "/tmp/cohort-checkpoint-cost", "checkpoint folder (emptied first)");

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

class NullSink final : public PartSink {
 public:
  void Send(PartId, int64_t, absl::Span<const float>, PinCount*) override {}
};

struct Shards {
  std::vector<std::unique_ptr<ShardCore>> cores;
  std::vector<std::unique_ptr<ShardCheckpointer>> writers;
  int64_t next_step = 0;
};

Shards MakeShards(const PartitionMap& map, const std::string& dir, std::ostream* log) {
  Shards s;
  const int num_shards = map.num_shards;
  for (int r = 0; r < num_shards; ++r) {
    ShardConfig config;
    config.num_workers = 1;
    config.mode = KVStoreMode::kDistSync;
    config.optimizer.optimizer = "sgd";
    config.optimizer.optimizer_options.momentum = 0.9;
    config.optimizer.lr_schedule.base_lr = 0.01;
    config.optimizer.lr_schedule.steps_per_epoch = 1000;
    for (const Part& p : map.parts) config.num_parts += p.shard == r;
    s.cores.push_back(std::make_unique<ShardCore>(r));
    if (!dir.empty()) {
      s.writers.push_back(std::make_unique<ShardCheckpointer>(
          ShardCheckpointerOptions{dir, 2, r, num_shards}, nullptr, log));
      s.cores[r]->set_checkpoints(2, s.writers[r].get());
    }
    (void)s.cores[r]->Configure(config);
  }
  for (const Part& p : map.parts) {
    (void)s.cores[p.shard]->AddPart({p.key, p.index}, std::vector<float>(p.elements, 0.5f));
  }
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs `steps` steps (every part pushed once, on every shard); adds each step's seconds to
// `checkpoint` when its version is a checkpoint's (every 2nd), to `other` otherwise.
void Steps(Shards& s, const PartitionMap& map, int steps, std::vector<double>* checkpoint,
           std::vector<double>* other) {
  NullSink sink;
  std::vector<float> grad;
  for (int i = 0; i < steps; ++i) {
    const int64_t step = s.next_step++;
    const auto start = Clock::now();
    for (const Part& p : map.parts) {
      grad.assign(p.elements, 1e-3f);
      if (absl::Status pushed = s.cores[p.shard]->Push(0, {p.key, p.index}, step, grad, &sink);
          !pushed.ok()) {
        std::cerr << "checkpoint_cost: " << pushed.message() << "\n";
        std::exit(1);
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    ((step + 1) % 2 == 0 ? checkpoint : other)->push_back(seconds);
  }
  for (auto& w : s.writers) w->Flush();
}

int Run() {
  const std::string model_name = absl::GetFlag(FLAGS_model);
  OnednnBackend backend;
  const int64_t side = ModelImageSize(model_name);
  auto model = BuildModel(model_name, &backend, Shape{3, side, side}, absl::GetFlag(FLAGS_classes));
  if (!model.ok()) {
    std::cerr << "checkpoint_cost: " << model.status().message() << "\n";
    return 1;
  }
  std::vector<TensorSize> sizes;
  for (const Parameter* p : (*model)->parameters()) sizes.push_back({p->value.numel(), 4});
  auto map = PartitionParameters(sizes, absl::GetFlag(FLAGS_shards), 1 << 20);
  if (!map.ok()) return 1;
  const std::string dir = absl::GetFlag(FLAGS_dir);
  std::filesystem::remove_all(dir);
  const int steps = absl::GetFlag(FLAGS_steps);

  std::ostringstream log;
  Shards plain = MakeShards(*map, "", &log);
  Shards checkpointing = MakeShards(*map, dir, &log);
  // Alternate so that drift of the machine's speed hits both alike.
  std::vector<double> without, at_checkpoint, between;
  for (int round = 0; round < 4; ++round) {
    Steps(plain, *map, steps / 4, &without, &without);
    Steps(checkpointing, *map, steps / 4, &at_checkpoint, &between);
  }
  const auto load_start = Clock::now();
  auto point = LoadLatestShardCheckpoint(dir, {0}, map->num_shards);
  const double load = std::chrono::duration<double>(Clock::now() - load_start).count();
  std::printf("checkpoint_cost: %s, %lld parameters (%.1f MB), %d shards, %zu parts of <= 1 MiB\n",
              model_name.c_str(), static_cast<long long>((*model)->num_parameter_elements()),
              (*model)->num_parameter_elements() * 4 / 1e6, map->num_shards, map->parts.size());
  std::printf("a step's updates on every shard, median: %.1f ms without checkpoints (%zu steps); "
              "checkpointing every 2nd step: %.1f ms at a checkpoint step (%zu), %.1f ms between "
              "(%zu, the writers busy)\n",
              Median(without) * 1e3, without.size(), Median(at_checkpoint) * 1e3,
              at_checkpoint.size(), Median(between) * 1e3, between.size());
  std::printf("load of the newest checkpoint by shard 0 (every shard's manifest verified): %.2f s "
              "(%s)\n%s",
              load, point.ok() ? "ok" : std::string(point.status().message()).c_str(),
              log.str().c_str());
  return point.ok() ? 0 : 1;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  if (!cohort::ParseCanonicalCommandLine("checkpoint_cost", argc, argv, {})) return 2;
  return cohort::Run();
}
