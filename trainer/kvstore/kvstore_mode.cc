#include "trainer/kvstore/kvstore_mode.h"

#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<KVStoreMode> ParseKVStoreMode(absl::string_view name) {
  if (name == "local") return KVStoreMode::kLocal;
  if (name == "dist_sync") return KVStoreMode::kDistSync;
  if (name == "dist_async") return KVStoreMode::kDistAsync;
  return absl::InvalidArgumentError(
      absl::StrCat("kvstore type '", name, "': expected local, dist_sync or dist_async"));
}

absl::string_view KVStoreModeName(KVStoreMode mode) {
  switch (mode) {
    case KVStoreMode::kLocal:
      return "local";
    case KVStoreMode::kDistSync:
      return "dist_sync";
    case KVStoreMode::kDistAsync:
      return "dist_async";
  }
  return "unknown";
}

}  // namespace cohort
