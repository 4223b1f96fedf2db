#include "services/shard/replication/share_copier.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "services/common/count_text.h"
#include "services/common/grpc_util.h"

namespace cohort {

absl::StatusOr<std::vector<int>> CopyShares(const ShardsView& view, int rank,
                                            const ShardReplication& held, const ShardDialer& dial,
                                            std::ostream* out) {
  std::vector<int> copied;
  for (size_t share = 0; share < view.share_backups.size(); ++share) {
    if (view.share_backups[share] != rank) continue;
    const std::string leader = absl::StrCat("shard ", view.share_leaders.at(share), " at ",
                                            view.addresses.at(share));
    const absl::Time start = absl::Now();
    v1::CopyShareRequest request;
    request.set_share(static_cast<int>(share));
    request.set_address(view.share_backup_addresses.at(share));
    request.set_rank(rank);
    v1::CopyShareReply reply;
    grpc::ClientContext context;
    const grpc::Status status = dial(view.addresses[share])->CopyShare(&context, request, &reply);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "shard ", rank, ": ", leader, " did not copy share ", share, " here: ",
          status.error_message(), "; the share goes on without a backup"));
    }
    if (held.PartsOfShare(static_cast<int>(share)) != reply.parts()) {
      return absl::DataLossError(absl::StrCat(
          "shard ", rank, ": ", leader, " copied ", Count(reply.parts(), "part"), " of share ",
          share, ", but ", held.PartsOfShare(static_cast<int>(share)), " are held here"));
    }
    *out << absl::StrFormat("shard %d: backs up share %d (%s) led by %s, copied in %.0f ms\n",
                            rank, share, Count(reply.parts(), "part"), leader,
                            absl::ToDoubleMilliseconds(absl::Now() - start))
         << std::flush;
    copied.push_back(static_cast<int>(share));
  }
  return copied;
}

}  // namespace cohort
