#ifndef COHORT_SERVICES_SHARD_SHARD_CHECKPOINTER_H_
#define COHORT_SERVICES_SHARD_SHARD_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
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
// the core hands over each part it leads as it reaches the checkpoint step (a copy of the part
// under its lock: memory speed); once every part of a share is in for a step, the writer
// thread encodes and writes the share's file and manifest (shard-<share>: the shard's own, and
// with replicated shards each share it took over from a dead shard), then prunes to the newest
// `keep` complete checkpoints. When a write of a share is still queued as its next step
// completes, the older one is dropped (said on log): a slow disk costs checkpoints, never
// training time. A share whose parts were taken over between two of their checkpoint steps
// gives none at that step (the dead leader's parts of it were not handed over). A failed write
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
  void Holds(int share) override;
  void Add(int64_t step, int share, PartCheckpoint part) override;
  void RolledBack(int64_t step) override;

  // Returns once every step completed so far is written (or dropped); for tests and shutdown.
  void Flush();

 private:
  void WriteLoop();
  void Write(ShardCheckpoint checkpoint);
  // How the log names a share's checkpoint: nothing for the shard's own, " of share N" else.
  std::string OfShare(int share) const;

  const ShardCheckpointerOptions options_;
  ShardMetrics* const metrics_;
  std::ostream* const log_;

  absl::Mutex mu_;
  ShardConfig config_ ABSL_GUARDED_BY(mu_);
  std::map<int, int> share_parts_ ABSL_GUARDED_BY(mu_);  // the parts held, by share
  // By (step, share): shares missing parts, and complete ones to write.
  std::map<std::pair<int64_t, int>, ShardCheckpoint> gathering_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int>, ShardCheckpoint> queued_ ABSL_GUARDED_BY(mu_);
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
