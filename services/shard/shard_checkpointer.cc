#include "services/shard/shard_checkpointer.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/checkpoint/checkpoint_files.h"

namespace cohort {
namespace {

template <typename Map, typename Predicate>
void EraseIf(Map& map, Predicate erase) {
  for (auto it = map.begin(); it != map.end();) it = erase(*it) ? map.erase(it) : std::next(it);
}

}  // namespace

ShardCheckpointer::ShardCheckpointer(ShardCheckpointerOptions options, ShardMetrics* metrics,
                                     std::ostream* log)
    : options_(std::move(options)), metrics_(metrics), log_(log) {
  writer_ = std::thread([this] { WriteLoop(); });
}

ShardCheckpointer::~ShardCheckpointer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  if (failed_since_.empty()) return;
  *log_ << absl::StrFormat(
               "shard %d: warning: the last %d checkpoint(s) (steps %s) were not written; the "
               "newest this shard wrote is %s\n",
               options_.shard_rank, failed_since_.size(), absl::StrJoin(failed_since_, ", "),
               newest_written_ < 0
                   ? std::string("none")
                   : absl::StrCat("step ", newest_written_, " (",
                                  CheckpointFolder(options_.root, newest_written_), ")"))
        << std::flush;
}

void ShardCheckpointer::Configured(const ShardConfig& config) {
  absl::MutexLock lock(&mu_);
  config_ = config;
}

void ShardCheckpointer::Holds(int share) {
  absl::MutexLock lock(&mu_);
  ++share_parts_[share];
}

void ShardCheckpointer::RolledBack(int64_t step) {
  absl::MutexLock lock(&mu_);
  const auto after = [step](auto& steps) {
    EraseIf(steps, [step](const auto& entry) { return entry.first.first > step; });
  };
  after(gathering_);
  after(queued_);
}

void ShardCheckpointer::Add(int64_t step, int share, PartCheckpoint part) {
  absl::MutexLock lock(&mu_);
  ShardCheckpoint& c = gathering_[{step, share}];
  c.parts.push_back(std::move(part));
  if (static_cast<int>(c.parts.size()) < share_parts_[share]) return;
  c.step = step;
  c.shard_rank = share;
  c.num_shards = options_.num_shards;
  c.mode = std::string(KVStoreModeName(config_.mode));
  c.num_workers = config_.num_workers;
  c.steps_per_epoch = config_.optimizer.lr_schedule.steps_per_epoch;
  c.partition_fingerprint = config_.partition_fingerprint;
  // The share's older steps: queued ones are dropped, and ones still missing parts (taken
  // over between two checkpoint steps) will never have them.
  for (auto it = queued_.begin(); it != queued_.end();) {
    if (it->first.second != share || it->first.first > step) {
      ++it;
      continue;
    }
    *log_ << absl::StrFormat(
        "shard %d: checkpoint%s at step %d not written: the one before it is still being "
        "written and step %d is complete (a slower disk than checkpoint_every allows)\n",
        options_.shard_rank, OfShare(share), it->first.first, step) << std::flush;
    if (metrics_ != nullptr) metrics_->checkpoints_dropped.Increment();
    it = queued_.erase(it);
  }
  queued_.emplace(std::make_pair(step, share), std::move(c));
  EraseIf(gathering_, [step, share](const auto& entry) {
    return entry.first.second == share && entry.first.first <= step;
  });
}

std::string ShardCheckpointer::OfShare(int share) const {
  return share == options_.shard_rank ? "" : absl::StrCat(" of share ", share);
}

void ShardCheckpointer::Flush() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ShardCheckpointer* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
        return c->queued_.empty() && !c->writing_;
      },
      this));
}

void ShardCheckpointer::WriteLoop() {
  while (true) {
    ShardCheckpoint next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ShardCheckpointer* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return !c->queued_.empty() || c->stopping_;
          },
          this));
      if (queued_.empty()) return;  // stopping, everything written
      next = std::move(queued_.begin()->second);
      queued_.erase(queued_.begin());
      writing_ = true;
    }
    Write(std::move(next));
    absl::MutexLock lock(&mu_);
    writing_ = false;
  }
}

void ShardCheckpointer::Write(ShardCheckpoint c) {
  // Parts arrive in whatever order their updates finished: the file lists them in order.
  std::sort(c.parts.begin(), c.parts.end(), [](const PartCheckpoint& a, const PartCheckpoint& b) {
    return a.id.key != b.id.key ? a.id.key < b.id.key : a.id.part < b.id.part;
  });
  if (!written_ && options_.before_first_write != nullptr) options_.before_first_write();
  written_ = true;
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<int64_t> bytes = WriteShardCheckpoint(options_.root, c);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!bytes.ok()) {
    *log_ << absl::StrFormat(
        "shard %d: error: checkpoint%s at step %d not written to %s: %s; training goes on, "
        "the newest complete checkpoint stays the one before (is --checkpoint_dir writable, "
        "with space?)\n",
        options_.shard_rank, OfShare(c.shard_rank), c.step,
        CheckpointFolder(options_.root, c.step), bytes.status().message())
          << std::flush;
    if (metrics_ != nullptr) metrics_->checkpoint_failures.Increment();
    failed_since_.push_back(c.step);
    return;
  }
  newest_written_ = c.step;
  failed_since_.clear();
  *log_ << absl::StrFormat("shard %d: checkpoint%s at step %d written to %s (%.1f MB in %.2f s)\n",
                           options_.shard_rank, OfShare(c.shard_rank), c.step,
                           CheckpointFolder(options_.root, c.step), *bytes / 1e6, seconds)
        << std::flush;
  if (metrics_ != nullptr) {
    metrics_->checkpoint_seconds.Observe(seconds);
    metrics_->checkpoint_bytes.Set(static_cast<double>(*bytes));
    metrics_->checkpoint_step.Set(static_cast<double>(c.step));
  }
  // Every shard prunes: whichever writes a checkpoint's last part sees it complete first.
  const absl::Status s =
      PruneCheckpoints(options_.root, ShardCheckpointManifests(c.num_shards), options_.keep);
  if (!s.ok()) {
    *log_ << "shard " << options_.shard_rank << ": error: pruning old checkpoints: " << s.message()
          << "\n" << std::flush;
  }
}

}  // namespace cohort
