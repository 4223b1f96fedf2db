#include "services/shard/shard_metrics.h"

namespace cohort {

absl::string_view RejectionName(Rejection reason) {
  switch (reason) {
    case Rejection::kMalformed: return "malformed";
    case Rejection::kWrongRank: return "wrong_rank";
    case Rejection::kNotReady: return "not_ready";
    case Rejection::kUnknownPart: return "unknown_part";
    case Rejection::kWrongSize: return "wrong_size";
    case Rejection::kStaleVersion: return "stale_version";
    case Rejection::kFutureVersion: return "future_version";
    case Rejection::kDuplicate: return "duplicate";
    case Rejection::kRolledBack: return "rolled_back";
    case Rejection::kNonFinite: return "non_finite";
    case Rejection::kStaleGeneration: return "stale_generation";
  }
  return "unknown";
}

ShardMetrics::ShardMetrics(ProcessMetrics& p)
    : received_bytes(p.Counter("cohort_shard_received_bytes_total",
                               "Bytes of pushed parts received from workers.")),
      sent_bytes(p.Counter("cohort_shard_sent_bytes_total",
                           "Bytes of updated parts sent to workers.")),
      received_messages(p.Counter("cohort_shard_received_messages_total",
                                  "Messages of pushed parts received from workers (small parts "
                                  "travel fused, several a message).")),
      received_parts(p.Counter("cohort_shard_received_parts_total",
                               "Pushed parts received from workers.")),
      pushes_applied(p.Counter("cohort_shard_pushes_applied_total",
                               "Pushed parts that went into an optimizer update.")),
      apply_seconds(p.Histogram("cohort_shard_optimizer_apply_seconds",
                                "Time of one optimizer update of one part.",
                                {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1})),
      pulls_waiting(p.Gauge("cohort_shard_pulls_waiting",
                            "Pushed parts whose updated value waits for other workers' pushes.")),
      parameter_version(p.Gauge("cohort_shard_parameter_version",
                                "Updates applied so far to this shard's most updated part.")),
      checkpoint_seconds(p.Histogram("cohort_shard_checkpoint_seconds",
                                     "Time to encode and durably write one checkpoint.",
                                     {0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30})),
      checkpoint_bytes(p.Gauge("cohort_shard_checkpoint_bytes",
                               "Size of the last checkpoint file this shard wrote.")),
      checkpoint_step(p.Gauge("cohort_shard_checkpoint_step",
                              "Step of the last checkpoint this shard wrote.")),
      checkpoint_failures(p.Counter("cohort_shard_checkpoint_failures_total",
                                    "Checkpoint writes that failed (the previous one stays).")),
      checkpoints_dropped(p.Counter(
          "cohort_shard_checkpoints_dropped_total",
          "Checkpoints not written because the previous one was still being written.")),
      resumed_step(p.Gauge("cohort_shard_resumed_step",
                           "Checkpoint step this shard process started from, or last rolled "
                           "back to (0: a new job).")) {
  auto& family =
      p.CounterFamily("cohort_shard_rejected_requests_total", "Pushes the shard refused, by reason.");
  for (int r = 0; r < kNumRejections; ++r) {
    rejected[r] = &family.Add({{"reason", std::string(RejectionName(static_cast<Rejection>(r)))}});
  }
}

}  // namespace cohort
