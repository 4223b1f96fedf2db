#ifndef COHORT_SERVICES_WORKER_SHARD_RECOVERY_H_
#define COHORT_SERVICES_WORKER_SHARD_RECOVERY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "services/membership/job_membership.h"
#include "services/worker/dist_kvstore_core.h"
#include "services/worker/shard_transport.h"
#include "trainer/kvstore/kvstore.h"

namespace cohort {

// An elastic job's step on the shards when its workers changed, numbered for the new number
// of workers: the same epoch, at the same share of it done (steps per epoch follow 1/W).
int64_t RenumberStep(int64_t step, int64_t old_steps_per_epoch, int64_t new_steps_per_epoch);

// The worker's recovery of its data path (DistKVStoreCore), gRPC-free: after a shard died and
// came back from its checkpoint, and when the job's workers changed (an elastic job's new
// generation). Every worker of the generation runs it at once; rank 0 sets the shards up. It
// drives the core through its recovery calls (stop, redial and reopen the streams, a shard's
// settings and set-up) and the membership's barriers, and talks to the shards on the core's
// transport (their checkpoints, roll back).
//
// The four ways back a worker has, and where each is:
//  1. A shard died and came back from its checkpoint (--restart_failed_shards): Recover rolls
//     every shard back to the checkpoint the restarted one resumed from.
//  2. The job's workers changed (--on_worker_failure=elastic): Recover regroups the workers of
//     the new generation (Regroup), every shard back to the newest checkpoint they all hold.
//  3. A worker joins a running elastic job: it regroups with the others at its commit.
//  4. A shard of a job of replicated shards (--shard_replicas 2) died: no roll back and no
//     call here; the data path hands the dead shard's parts to their backups within the wait
//     (DistKVStoreCore::TakeOver, dist_kvstore_core_takeover.cc), which hold every update the
//     leader answered (services/shard/replication/shard_replication.h), and the step goes on.
//
// Calls come from the store's one calling thread.
class ShardRecovery {
 public:
  // core and membership outlive the recovery; it talks to the shards on the core's transport.
  ShardRecovery(DistKVStoreCore* core, JobMembership* membership);

  // How the update rule follows the number of workers (KVStoreRecovery::SetUpdateRuleFor).
  void SetUpdateRuleFor(KVStoreRecovery::UpdateRuleFor rule) { update_rule_ = std::move(rule); }

  // After a call of the committed store failed with `failure`. standing: how the store's
  // commit, or its last regroup, went; a regroup replaces it with its own outcome.
  // When the failure is a shard's stream ending Unavailable (it died) in a job whose scheduler
  // waits for dead shards (--shard_restart_grace): every worker stops pushing (a barrier) and
  // waits, up to the grace, for a shard to come back from its checkpoint (another process at
  // its rank); the streams are dialled again at the shards' addresses now; rank 0 sets up the
  // restarted shards and rolls every shard to the oldest checkpoint they resumed from (a shard
  // that dies meanwhile is waited for and set up too); after a second barrier every worker
  // dials the shards the scheduler lists then, the streams open again, and the caller pulls
  // every key (a pull that fails on a shard that died is recovered from in turn) and goes on
  // from StartStep().
  // When the job's workers changed (the scheduler's new generation, heard on the control
  // stream or from a barrier), also while a shard was coming back: the streams close, the
  // workers of the new generation regroup (Regroup) and the caller pulls and goes on as above.
  // Any other failure comes back as it is; one while recovering carries both.
  absl::Status Recover(const absl::Status& failure, absl::Status* standing);

  // The workers of the core's generation meet (a barrier), rank 0 sets the shards up for it
  // (every shard back to the newest checkpoint they all hold, renumbered for the new number of
  // workers, or initialised when no worker had) and, after a second barrier, the streams open:
  // the caller pulls every key. When the job moves on to yet another generation meanwhile, it
  // starts over there. A worker that joined an elastic job regroups at its commit.
  absl::Status Regroup();

 private:
  // Recover's path for a shard's death (failure: how its stream ended): MembershipChangedError
  // when the workers change meanwhile.
  absl::Status RecoverShards(const absl::Status& failure);
  // Waits, up to the scheduler's grace, for the shards that came back: their ranks, with the
  // view of the shards they are in. Rank 0 (which sets them up) counts a shard as back when its
  // incarnation is not the one rank 0 last set up: one that restarted while the workers
  // followed rank 0's set-up was dialled, never rolled back. Other workers only need every
  // shard up (rank 0 decides which roll back).
  absl::StatusOr<std::vector<int>> WaitForRestartedShards(ShardsView* view);
  // The core's streams dialled again at the shards of the job's current generation.
  absl::Status MoveToCurrentGeneration();
  absl::Status RegroupOnce();
  // Rank 0 of a new generation: shards rank 0 never initialised are initialised; otherwise
  // every shard goes back to the newest checkpoint they all hold, renumbered for the new number
  // of workers, under the generation's update rule (a shard that restarted from a checkpoint
  // meanwhile is set up first as the job ran when its checkpoint was written). Where it goes:
  // `plan`, made by the first try (a later one, after a shard died meanwhile, finds some shards
  // gone on already). Unavailable when a shard died.
  struct RegenerationPlan {
    int64_t step;       // the newest checkpoint every shard held
    int num_workers;    // the workers it was written by
    int64_t next_step;  // its step renumbered for the generation's
  };
  absl::Status RegenerateShards(std::optional<RegenerationPlan>* plan);
  // Rank 0, in a regroup: RegenerateShards, again each time a shard dies meanwhile, once it
  // came back.
  absl::Status RegenerateShardsAsTheyComeBack();
  // Rank 0: a shard restarted from its checkpoint set up again with `config`; the
  // checkpoint's step.
  absl::StatusOr<int64_t> SetUpRestartedShard(int shard, const ShardConfig& config);
  // Rank 0, after `failure` (Unavailable: a shard died while rank 0 set the shards up): waits,
  // up to the grace, for the shards that came back and dials them; their ranks. The failure
  // itself when the job waits for no dead shard.
  absl::StatusOr<std::vector<int>> AwaitShardsBack(const absl::Status& failure);
  // Rank 0, in Recover: `restarted` (shard ranks) came back from a checkpoint; every shard goes
  // to its step. A shard that dies meanwhile is waited for, set up and rolled back too.
  absl::Status RollBackShards(std::vector<int> restarted);
  // One try of RollBackShards: resumed gains the step each of `restarted` resumed from.
  absl::Status SetUpAndRollBack(const std::vector<int>& restarted,
                                std::map<int, int64_t>* resumed);
  // After rank 0 set the shards up: the streams dialled again at shards that restarted since
  // this worker last looked (rank 0 waited for them).
  absl::Status FollowRestartsMeanwhile();

  DistKVStoreCore* const core_;
  JobMembership* const membership_;
  ShardTransport* const transport_;
  KVStoreRecovery::UpdateRuleFor update_rule_;
  // Rank 0: the shards' incarnations as it last set them up (empty: as the job began).
  std::vector<std::string> set_up_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_SHARD_RECOVERY_H_
