// table_bench: one shard's embedding table under a click model's load: a collisionless table
// grown to --rows rows of --dim floats (Adagrad's accumulator beside each), then steps of
// --batch_ids Zipf-distributed ids pulled and pushed, as a shard serves them.
//   bazel run -c opt //tools/bench:table_bench -- --rows=2000000 --dim=64
// Prints rows/s of pulls and pushes (one thread), and the process's resident memory against the
// rows and their state alone.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tools/bench/proc_usage.h"
#include "trainer/base/random.h"
#include "trainer/kvstore/embedding_table.h"
#include "trainer/optim/row_optimizer.h"

ABSL_FLAG(int64_t, rows, 2000000, "rows the table grows to");
ABSL_FLAG(int64_t, dim, 64, "floats a row");
ABSL_FLAG(int64_t, batch_ids, 4096, "ids a step pulls and pushes");
ABSL_FLAG(int, steps, 200, "timed steps");
ABSL_FLAG(double, zipf, 1.05, "the ids' Zipf exponent over the rows");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t rows = absl::GetFlag(FLAGS_rows), dim = absl::GetFlag(FLAGS_dim);
  const int64_t batch = absl::GetFlag(FLAGS_batch_ids);
  const int64_t resident_before = cohort::ProcessResidentBytes(getpid());
  cohort::RowAdagrad adagrad({});
  cohort::TableSpec spec;
  spec.name = "bench";
  spec.dim = dim;
  spec.kind = cohort::TableSpec::Kind::kCollisionless;
  cohort::EmbeddingTable table(spec, &adagrad);
  // Grow the table: every row pushed once, in steps of `batch`.
  std::vector<uint64_t> ids(batch);
  std::vector<float> grads(batch * dim, 1e-3f), out(batch * dim);
  const auto grow_start = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < rows; first += batch) {
    const int64_t n = std::min(batch, rows - first);
    for (int64_t i = 0; i < n; ++i) ids[i] = cohort::MixBits(first + i);
    if (!table.Apply(absl::MakeConstSpan(ids).first(n), absl::MakeConstSpan(grads).first(n * dim),
                     0.01f)
             .ok()) {
      return 1;
    }
  }
  const double grow_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - grow_start).count();
  // Zipf-distributed ranks over the rows, by inverse CDF.
  std::vector<double> cumulative(rows);
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    sum += std::pow(static_cast<double>(r + 1), -absl::GetFlag(FLAGS_zipf));
    cumulative[r] = sum;
  }
  cohort::Rng rng(7);
  double pull_s = 0, push_s = 0;
  int64_t unique = 0;
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    std::vector<uint64_t> batch_ids;
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t r =
          std::upper_bound(cumulative.begin(), cumulative.end() - 1, rng.Uniform() * sum) -
          cumulative.begin();
      batch_ids.push_back(cohort::MixBits(r));
    }
    // A worker pulls and pushes each row once: the batch's unique ids.
    std::sort(batch_ids.begin(), batch_ids.end());
    batch_ids.erase(std::unique(batch_ids.begin(), batch_ids.end()), batch_ids.end());
    const size_t n = batch_ids.size();
    unique += static_cast<int64_t>(n);
    auto t0 = std::chrono::steady_clock::now();
    if (!table.Pull(batch_ids, absl::MakeSpan(out).first(n * dim)).ok()) return 1;
    auto t1 = std::chrono::steady_clock::now();
    if (!table.Apply(batch_ids, absl::MakeConstSpan(grads).first(n * dim), 0.01f).ok()) return 1;
    auto t2 = std::chrono::steady_clock::now();
    pull_s += std::chrono::duration<double>(t1 - t0).count();
    push_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const int64_t resident = cohort::ProcessResidentBytes(getpid()) - resident_before;
  const double rows_state = static_cast<double>(rows) * dim * 2 * sizeof(float);
  const double steps = absl::GetFlag(FLAGS_steps);
  std::printf(
      "table_bench: %ld rows of %ld floats (Adagrad), grown in %.2f s (%.2f M rows/s)\n"
      "  steps of %ld Zipf(%.2f) ids, %.0f unique a step on average\n"
      "  pull %.2f M rows/s, push (Adagrad) %.2f M rows/s, one thread\n"
      "  resident %.1f MiB for %.1f MiB of rows and state: %.3fx (the table's own count %.3fx; "
      "the rest its key map)\n",
      rows, dim, grow_s, rows / grow_s / 1e6, batch, absl::GetFlag(FLAGS_zipf), unique / steps,
      unique / pull_s / 1e6, unique / push_s / 1e6, resident / 1048576.0, rows_state / 1048576.0,
      resident / rows_state, table.bytes_held() / rows_state);
  return 0;
}
