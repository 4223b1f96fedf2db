#ifndef COHORT_SERVICES_SHARD_SHARD_CHECKPOINTER_H_
#define COHORT_SERVICES_SHARD_SHARD_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_metrics.h"

namespace cohort {

struct ShardCheckpointerOptions {
  std::string root;  // --checkpoint_dir
  int keep = 3;      // complete checkpoints kept (older ones are removed)
  int shard_rank = 0;
  int num_shards = 1;
  // Runs once on the writer thread before its first write (ShardRollback::ClearUndoneSteps).
  std::function<void()> before_first_write;
};

// Writes a shard's checkpoints on its own thread, so that training never waits for the disk:
// the core hands over each part's copy as it reaches the checkpoint step (a copy of the part
// under its lock: memory speed); once every part of a step is in, the writer thread encodes
// and writes the shard's file and manifest, then prunes to the newest `keep` complete
// checkpoints. When a write is still queued as the next step completes, the older one is
// dropped (said on log): a slow disk costs checkpoints, never training time. A failed write
// (disk full) is said with the folder and counted; training goes on, the previous checkpoint
// stays the newest complete one, and the next step's is tried as usual (once space returns,
// checkpoints resume). The destructor writes what is queued and says when the last writes
// failed, naming the newest checkpoint this shard wrote.
class ShardCheckpointer final : public CheckpointSink {
 public:
  // metrics may be null; log receives a line per checkpoint.
  ShardCheckpointer(ShardCheckpointerOptions options, ShardMetrics* metrics, std::ostream* log);
  ~ShardCheckpointer() override;

  void Configured(const ShardConfig& config) override;
  void Add(int64_t step, PartCheckpoint part) override;
  void RolledBack(int64_t step) override;

  // Returns once every step completed so far is written (or dropped); for tests and shutdown.
  void Flush();

 private:
  void WriteLoop();
  void Write(ShardCheckpoint checkpoint);

  const ShardCheckpointerOptions options_;
  ShardMetrics* const metrics_;
  std::ostream* const log_;

  absl::Mutex mu_;
  ShardConfig config_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, ShardCheckpoint> gathering_ ABSL_GUARDED_BY(mu_);  // steps missing parts
  std::map<int64_t, ShardCheckpoint> queued_ ABSL_GUARDED_BY(mu_);     // complete, to write
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The writer thread's: whether it has written before, the newest step it wrote, and the
  // steps that failed since then.
  bool written_ = false;
  int64_t newest_written_ = -1;
  std::vector<int64_t> failed_since_;
  std::thread writer_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_CHECKPOINTER_H_
