#ifndef COHORT_SERVICES_SHARD_REPLICATION_BACKUP_LINKS_H_
#define COHORT_SERVICES_SHARD_REPLICATION_BACKUP_LINKS_H_

#include <functional>
#include <memory>
#include <ostream>

#include "services/common/transport_security.h"
#include "services/shard/replication/shard_replication.h"

namespace cohort {

// How a shard reaches its backups: the link to the backup at an address goes through shared
// memory when that shard is on this host and offers it (and shared_memory is on), else over its
// Replicate stream with `security`. rank: how the links name this shard, read as each is made
// (after the shard registered). out says which way each link went; err, why shared memory was
// not taken where it was offered, and what each link says.
ShardReplication::LinkFactory BackupLinks(bool shared_memory, std::function<int()> rank,
                                          std::shared_ptr<const TransportSecurity> security,
                                          std::ostream* out, std::ostream* err);

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_REPLICATION_BACKUP_LINKS_H_
