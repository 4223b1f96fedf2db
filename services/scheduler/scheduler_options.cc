#include "services/scheduler/scheduler_options.h"

#include "absl/strings/str_cat.h"
#include "services/common/job_id.h"
#include "trainer/kvstore/kvstore_mode.h"

namespace cohort {
namespace {

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::StatusOr<JobSpec> SchedulerOptions::ToJobSpec() const {
  JobSpec spec;
  if (num_workers < 1 || num_shards < 1) {
    return Invalid(absl::StrCat("the job needs at least 1 worker and 1 shard (--num_workers=",
                                num_workers, ", --num_shards=", num_shards, ")"));
  }
  spec.num_workers = num_workers;
  spec.num_shards = num_shards;
  const absl::StatusOr<KVStoreMode> parsed = ParseKVStoreMode(mode);
  if (!parsed.ok() || *parsed == KVStoreMode::kLocal) {
    return Invalid(absl::StrCat("unknown --mode '", mode, "'; use dist_sync or dist_async"));
  }
  spec.mode = *parsed;
  spec.job_id = job_id.empty() ? NewJobId() : job_id;
  if (!IsValidJobId(spec.job_id)) {
    return Invalid(absl::StrCat("--job_id '", spec.job_id,
                                "' may hold only letters, digits, '.', '_' and '-'"));
  }
  if (linger_s < 0 || heartbeat_timeout_s < 0 || shard_restart_grace_s < 0 ||
      max_shard_restarts < 0 || form_timeout_s <= 0 || baseline_images_per_second < 0) {
    return Invalid(
        "--linger, --heartbeat_timeout, --shard_restart_grace, --max_shard_restarts and "
        "--baseline_images_per_second must be 0 or more, --form_timeout more than 0");
  }
  if (on_worker_failure != "fail" && !elastic()) {
    return Invalid(
        absl::StrCat("--on_worker_failure=", on_worker_failure, ": expected fail or elastic"));
  }
  spec.elastic = elastic();
  spec.min_workers = min_workers;
  spec.max_workers = max_workers == 0 ? num_workers : max_workers;
  if (spec.elastic && (spec.min_workers < 1 || spec.min_workers > num_workers ||
                       spec.max_workers < num_workers)) {
    return Invalid(absl::StrCat("--min_workers=", min_workers, " and --max_workers=", max_workers,
                                ": need 1 <= min_workers <= the number of workers (",
                                num_workers, ") <= max_workers"));
  }
  const int members = num_shards + spec.max_workers;
  spec.heartbeat_timeout = heartbeat_timeout_s > 0 ? absl::Seconds(heartbeat_timeout_s)
                                                   : AutomaticHeartbeatTimeout(members);
  spec.heartbeat_interval = HeartbeatIntervalFor(members, spec.heartbeat_timeout);
  spec.form_timeout = absl::Seconds(form_timeout_s);
  spec.shard_restart_grace = absl::Seconds(shard_restart_grace_s);
  spec.max_shard_restarts = max_shard_restarts;
  if (shard_replicas < 1 || shard_replicas > 2 || (shard_replicas == 2 && num_shards < 2)) {
    return Invalid(absl::StrCat("--shard_replicas=", shard_replicas, " with ", num_shards,
                                " shards: 1, or 2 with 2 shards or more (a part's backup is on "
                                "another shard)"));
  }
  spec.shard_replicas = shard_replicas;
  return spec;
}

std::vector<std::string> SchedulerOptions::ToArgs() const {
  const SchedulerOptions defaults;
  std::vector<std::string> args = {
      absl::StrCat("--num_workers=", num_workers),
      absl::StrCat("--num_shards=", num_shards),
      absl::StrCat("--mode=", mode),
      absl::StrCat("--linger=", linger_s),
      absl::StrCat("--job_id=", job_id),
      absl::StrCat("--baseline_images_per_second=", baseline_images_per_second)};
  if (heartbeat_timeout_s != defaults.heartbeat_timeout_s) {
    args.push_back(absl::StrCat("--heartbeat_timeout=", heartbeat_timeout_s));
  }
  if (form_timeout_s != defaults.form_timeout_s) {
    args.push_back(absl::StrCat("--form_timeout=", form_timeout_s));
  }
  if (shard_restart_grace_s > 0) {
    args.push_back(absl::StrCat("--shard_restart_grace=", shard_restart_grace_s));
  }
  if (max_shard_restarts > 0) {
    args.push_back(absl::StrCat("--max_shard_restarts=", max_shard_restarts));
  }
  if (shard_replicas != defaults.shard_replicas) {
    args.push_back(absl::StrCat("--shard_replicas=", shard_replicas));
  }
  if (!report_file.empty()) args.push_back(absl::StrCat("--report_file=", report_file));
  if (elastic()) {
    args.push_back("--on_worker_failure=elastic");
    args.push_back(absl::StrCat("--min_workers=", min_workers));
    args.push_back(absl::StrCat("--max_workers=", max_workers > 0 ? max_workers : num_workers));
  }
  return args;
}

}  // namespace cohort
