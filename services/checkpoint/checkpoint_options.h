#ifndef COHORT_SERVICES_CHECKPOINT_CHECKPOINT_OPTIONS_H_
#define COHORT_SERVICES_CHECKPOINT_CHECKPOINT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"

namespace cohort {

// A shard's checkpoints (Contracts: --checkpoint_dir, --checkpoint_every, --resume): the shard
// reads them from its flags and the launcher from its own, the same flags
// (COHORT_DEFINE_CHECKPOINT_FLAGS), checked by one Validate, and hands them to every shard
// with ToArgs.
struct CheckpointOptions {
  std::string checkpoint_dir;  // where checkpoints are written (empty: resume's folder)
  int64_t checkpoint_every = 0;  // steps between checkpoints (0: none)
  int checkpoint_keep = 3;       // complete checkpoints kept
  std::string resume;            // start from the newest complete checkpoint under this

  // Where the checkpoints are written and rolled back to: checkpoint_dir, else resume's folder.
  std::string folder() const { return checkpoint_dir.empty() ? resume : checkpoint_dir; }
  // InvalidArgument naming the flags: steps < 0, keep < 1, checkpoints without a folder.
  absl::Status Validate() const;
  // The shard's command line for these options (only what differs from the defaults).
  std::vector<std::string> ToArgs() const;
  // The same, for a shard started again after it died: it resumes from where the job
  // checkpoints (one --resume, whatever the job started from).
  std::vector<std::string> ToArgsForRestart() const;
};

}  // namespace cohort

// The flags, for a <binary>_main.cc to expand at file scope (the shard's and the launcher's),
// and CheckpointOptionsFromFlags to read them there.
#define COHORT_DEFINE_CHECKPOINT_FLAGS()                                                         \
  ABSL_FLAG(std::string, checkpoint_dir, "",                                                     \
            "write checkpoints here: a folder per step, v<step>, with every shard's file and "    \
            "manifest (the shards of a job share it: one folder, or one network file system)");  \
  ABSL_FLAG(int64_t, checkpoint_every, cohort::CheckpointOptions().checkpoint_every,             \
            "steps between checkpoints (0: none)");                                              \
  ABSL_FLAG(int, checkpoint_keep, cohort::CheckpointOptions().checkpoint_keep,                   \
            "complete checkpoints to keep; older ones are removed");                             \
  ABSL_FLAG(std::string, resume, "",                                                             \
            "start from the newest complete checkpoint under this folder (a damaged or partial " \
            "one is named and skipped; the workers go on at its step); checkpoints go on there " \
            "unless --checkpoint_dir is given")

ABSL_DECLARE_FLAG(std::string, checkpoint_dir);
ABSL_DECLARE_FLAG(int64_t, checkpoint_every);
ABSL_DECLARE_FLAG(int, checkpoint_keep);
ABSL_DECLARE_FLAG(std::string, resume);

namespace cohort {

// The options the flags of COHORT_DEFINE_CHECKPOINT_FLAGS hold (not checked yet).
inline CheckpointOptions CheckpointOptionsFromFlags() {
  return {absl::GetFlag(FLAGS_checkpoint_dir), absl::GetFlag(FLAGS_checkpoint_every),
          absl::GetFlag(FLAGS_checkpoint_keep), absl::GetFlag(FLAGS_resume)};
}

}  // namespace cohort

#endif  // COHORT_SERVICES_CHECKPOINT_CHECKPOINT_OPTIONS_H_
