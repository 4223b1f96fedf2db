// DistKVStoreCore's takeover in a job of replicated shards: a dead shard's stream goes to the
// backup the scheduler names at its place, and what the dead shard had not answered goes there
// again.

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/worker/dist_kvstore_core.h"
#include "trainer/base/status_macros.h"

namespace cohort {

absl::Status DistKVStoreCore::TakeOver(const std::vector<int>& lost) {
  for (int shard : lost) {
    const std::string was = absl::StrCat("shard ", shard, " at ", shards_.addresses[shard]);
    if (options_.compression.encoding == WireEncoding::kTwoBit) {
      return WithLostShard(
          absl::UnavailableError(absl::StrCat(
              membership_->name(), ": ", was, " died; its backup cannot take its parts over "
              "from 2-bit pushes (a push sent again would count its error feedback twice): "
              "replicated shards take float32, fp16 or bf16 pushes")),
          shard);
    }
    // The scheduler names the backup at the dead shard's place once it knows of the death.
    const absl::Time deadline = absl::Now() + kTakeOverWait;
    ShardsView view;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (job_ended_) return Interrupted();
      }
      ASSIGN_OR_RETURN(view, membership_->WaitForShards(deadline - absl::Now()));
      if (view.generation != shards_.generation) {
        return MembershipChangedError(view.generation, "while a shard's parts were taken over");
      }
      if (view.incarnations.at(shard) != shards_.incarnations.at(shard)) break;
      if (absl::Now() > deadline) {
        return WithLostShard(absl::UnavailableError(absl::StrCat(
                                 membership_->name(), ": ", was, " died, and no shard took its "
                                 "parts over within ", absl::FormatDuration(kTakeOverWait))),
                             shard);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    transport_->Reopen(shard, view.addresses[shard], this);
    shards_.addresses[shard] = view.addresses[shard];
    shards_.incarnations[shard] = view.incarnations[shard];
    // What the dead shard had not answered goes to its backup, which answers what it holds
    // already and applies the rest.
    int again = 0;
    for (size_t key = 0; key < keys_.size(); ++key) {
      Key& k = *keys_[key];
      std::vector<int> unanswered;
      {
        absl::MutexLock lock(&mu_);
        if (!k.in_flight) continue;
        for (size_t i = 0; i < k.pending.size(); ++i) {
          if (k.pending[i] && map_.parts[map_.key_parts[key][i]].shard == shard) {
            unanswered.push_back(map_.key_parts[key][i]);
          }
        }
      }
      for (int index : unanswered) SendPart(static_cast<int64_t>(key), &k, map_.parts[index]);
      again += static_cast<int>(unanswered.size());
    }
    transport_->Flush();
    std::cerr << absl::StrCat(membership_->name(), ": ", was, " died; its backup at ",
                              view.addresses[shard], " leads its parts now (", again,
                              " sent to it again)\n");
  }
  return absl::OkStatus();
}

}  // namespace cohort
