#ifndef COHORT_SERVICES_SHARD_REPLICATION_SHARE_COPIER_H_
#define COHORT_SERVICES_SHARD_REPLICATION_SHARE_COPIER_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/shard.grpc.pb.h"
#include "services/membership/job_membership.h"
#include "services/shard/replication/shard_replication.h"

namespace cohort {

// The stub of the shard service at an address.
using ShardDialer = std::function<std::unique_ptr<v1::Shard::StubInterface>(const std::string&)>;

// A shard that came back into a running job of replicated shards leads nothing: for each share
// the scheduler gave it to back up (view.share_backups), it asks the shard leading that share
// for a copy (Shard.CopyShare), after which the share's updates come as they do to any backup.
// Returns the shares copied, once every copy is held by `held`; says each on out.
absl::StatusOr<std::vector<int>> CopyShares(const ShardsView& view, int rank,
                                            const ShardReplication& held,
                                            const ShardDialer& dial, std::ostream* out);

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_REPLICATION_SHARE_COPIER_H_
