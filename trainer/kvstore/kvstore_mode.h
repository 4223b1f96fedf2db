#ifndef COHORT_TRAINER_KVSTORE_KVSTORE_MODE_H_
#define COHORT_TRAINER_KVSTORE_KVSTORE_MODE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// What a --kv_store (or the scheduler's --mode) names, parsed once where it enters.
enum class KVStoreMode {
  kLocal,      // one process holds the parameters
  kDistSync,   // shards wait for every worker's push and reduce them in rank order
  kDistAsync,  // shards apply each push as it comes
};

// "local", "dist_sync", "dist_async"; InvalidArgument naming what was given otherwise.
absl::StatusOr<KVStoreMode> ParseKVStoreMode(absl::string_view name);
absl::string_view KVStoreModeName(KVStoreMode mode);

}  // namespace cohort

#endif  // COHORT_TRAINER_KVSTORE_KVSTORE_MODE_H_
