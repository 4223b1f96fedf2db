// memory_passes: what one pass over a 100 MB model costs on this machine, for the data path's
// budget (docs/benchmarks.md, push+pull): a memcpy (the shard's copy into a rank's slot, the
// worker's copy into the parameter), the shard's SGD update, as built for the shard, and its
// check of every push for NaN and infinities.
//   bazel run //tools/bench:memory_passes
// Prints the median of 7 timed passes of each.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "services/wire/byte_chunks.h"
#include "trainer/optim/optimizer.h"

namespace {

template <typename F>
double MedianMs(F pass) {
  std::vector<double> ms;
  for (int i = 0; i < 8; ++i) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    if (i > 0) ms.push_back(t);  // the first pass faults the pages in
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  const size_t n = 25'000'000;  // 100 MB of F32
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  auto sgd = *cohort::MakeOptimizer("sgd", {0.0, 0.0});
  const double copy = MedianMs([&] { std::memcpy(a.data(), b.data(), n * sizeof(float)); });
  const double update = MedianMs([&] { sgd->Update(0, absl::MakeSpan(a), b, 1e-6f); });
  // The shard's check of every push for NaN and infinities, over 1 MiB parts as they arrive.
  bool finite = true;
  const double check = MedianMs([&] {
    const size_t part = 1 << 18;  // floats
    for (size_t first = 0; first < n; first += part) {
      const absl::Span<const char> bytes(reinterpret_cast<const char*>(b.data() + first),
                                         std::min(part, n - first) * sizeof(float));
      finite = cohort::AllFinite(cohort::ByteChunks(&bytes, 1)) && finite;
    }
  });
  // The same over one 1 MiB part, 100 times: a push the shard has just received, in cache.
  const double check_cached = MedianMs([&] {
    const absl::Span<const char> bytes(reinterpret_cast<const char*>(b.data()), 1 << 20);
    for (int i = 0; i < 100; ++i) finite = cohort::AllFinite(cohort::ByteChunks(&bytes, 1)) && finite;
  });
  std::printf("memory_passes: 100 MB memcpy %.1f ms (%.2f GB/s); SGD update %.1f ms; finiteness "
              "check %.1f ms, %.1f ms over a 1 MiB part in cache 100 times (%s)\n",
              copy, 0.1 / (copy * 1e-3), update, check, check_cached,
              finite ? "all finite" : "NaN found");
  return 0;
}
