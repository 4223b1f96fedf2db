#ifndef COHORT_SERVICES_SHARD_SHARD_ROLLBACK_H_
#define COHORT_SERVICES_SHARD_SHARD_ROLLBACK_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "services/shard/shard_checkpointer.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_metrics.h"
#include "services/wire/shard_config.h"

namespace cohort {

// Where a shard's parameters start from and go back to, on its checkpoints (gRPC-free): a
// resume from the newest complete checkpoint (--resume), a roll back to a step after another
// shard came back from a checkpoint, an elastic job's regeneration (a roll back that goes on
// under a new generation), and the checkpoints it holds (rank 0 of the workers picks a step
// they all hold). Each start is said on `out` and counted (resumed_step); when the shard
// writes checkpoints into that folder, its files of later steps go (they will be written
// again: a folder never mixes two runs' files), and a later checkpoint refused as damaged is
// set aside whole (<folder>.damaged) for a person to look at. After a resume that happens only
// before the shard's first write or roll back: the other shards of the job may still be
// reading those checkpoints to choose theirs.
//
// Thread safety: SetUp, set_checkpointer and Resume come from main before the shard answers
// RollBack and Checkpoints (its service waits for the shard's set-up); those two may come from
// any thread and run one at a time.
class ShardRollback {
 public:
  // checkpoint_dir: where the shard's checkpoints are (--checkpoint_dir, or --resume's folder;
  // empty: it keeps none, and RollBack is refused). writes_checkpoints: --checkpoint_every > 0.
  // core outlives this; out and err receive what a person reads.
  ShardRollback(ShardCore* core, std::string checkpoint_dir, bool writes_checkpoints,
                std::ostream* out, std::ostream* err);

  // Once registered, before anything else: the shard's rank among num_shards, and where the
  // start step is counted (null: nowhere; it outlives this).
  void SetUp(int rank, int num_shards, ShardMetrics* metrics);
  // The writer the core hands its checkpoints to, once made (null: none). Outlives this.
  void set_checkpointer(ShardCheckpointer* checkpointer);

  // OK when the shard keeps checkpoints to roll back to; else RollBack's refusal.
  absl::Status KeepsCheckpoints() const;
  // Before the core is configured: the parts of `shares` (the shard's own first; with
  // replicated shards also those it backs up) start from the newest complete checkpoint under
  // `folder` (a damaged or partial newer one is named on err and skipped). The error names
  // the shard and the folder.
  absl::Status Resume(const std::string& folder, absl::Span<const int> shares);
  // The parts (of every share the shard holds) go back to the checkpoint at `step`; with `next`, they go on under its
  // generation from its step, and the shard writes its state at once as that generation's
  // first checkpoint, so that a later roll back never lands on a step numbered for another
  // number of workers. FailedPrecondition when the shard keeps no checkpoints.
  absl::Status RollBack(int64_t step, const std::optional<Regeneration>& next);
  // The steps of the checkpoints this shard holds, written out first, and how its steps are
  // numbered (once rank 0 configured it; before, as the checkpoint it resumed from). None
  // after the step it resumed from.
  ShardCheckpoints Checkpoints();
  // After Resume: the shard's files of the steps after it go, the damaged checkpoints it
  // skipped are set aside (errors are said on err). Once; before the shard's next write
  // (ShardCheckpointerOptions::before_first_write) or roll back.
  void ClearUndoneSteps();

 private:
  // The parts start from `step` of `folder`: said and counted.
  void Announce(int64_t step, const std::string& folder, absl::string_view what);
  // After a roll back to `step`: its later files removed.
  absl::Status RemoveStepsAfter(int64_t step);
  void FlushCheckpoints();

  ShardCore* const core_;
  const std::string checkpoint_dir_;
  const bool writes_checkpoints_;
  std::ostream* const out_;
  std::ostream* const err_;
  int rank_ = -1;
  int num_shards_ = 0;
  ShardMetrics* metrics_ = nullptr;
  ShardCheckpointer* checkpointer_ = nullptr;
  absl::Mutex mu_;  // one roll back or listing at a time
  // How the checkpoint Resume started from numbers its steps (num_workers 0: none).
  int resumed_num_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t resumed_steps_per_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // What a resume left to clear: this shard's files after `after`, the damaged versions.
  struct Undone {
    int64_t after = 0;
    std::vector<int64_t> damaged;
  };
  absl::Mutex undone_mu_;  // never held while the checkpointer is waited for
  std::optional<Undone> undone_ ABSL_GUARDED_BY(undone_mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_ROLLBACK_H_
