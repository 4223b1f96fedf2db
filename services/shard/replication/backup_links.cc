#include "services/shard/replication/backup_links.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_util.h"
#include "services/shard/replication/grpc_backup_link.h"
#include "services/shard/replication/shm_backup_link.h"

namespace cohort {

ShardReplication::LinkFactory BackupLinks(bool shared_memory, std::function<int()> rank,
                                          std::shared_ptr<const TransportSecurity> security,
                                          std::ostream* out, std::ostream* err) {
  return [=](const std::string& address) -> std::unique_ptr<BackupLink> {
    const std::string leader = absl::StrCat("shard ", rank());
    std::unique_ptr<BackupStream> stream;
    if (shared_memory) {
      absl::StatusOr<std::unique_ptr<ShmBackupStream>> shm = DialShmBackup(address);
      if (shm.ok()) {
        *out << leader << ": replicates to its backup at " << address
             << " through shared memory\n";
        stream = *std::move(shm);
      } else if (!absl::IsNotFound(shm.status())) {
        *err << leader << ": warning: its backup at " << address
             << " is on this host, but its shared-memory path failed (" << shm.status().message()
             << "); replicating to it over gRPC\n";
      }
    }
    if (stream == nullptr) {
      stream = std::make_unique<GrpcBackupStream>(
          v1::Shard::NewStub(MakeChannel(address, *security)));
    }
    return std::make_unique<StreamBackupLink>(std::move(stream), leader,
                                               absl::StrCat("the shard at ", address), err);
  };
}

}  // namespace cohort
