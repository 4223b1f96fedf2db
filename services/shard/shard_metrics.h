#ifndef COHORT_SERVICES_SHARD_SHARD_METRICS_H_
#define COHORT_SERVICES_SHARD_SHARD_METRICS_H_

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "services/common/metrics.h"

namespace cohort {

// Why a shard refused a request (the reason label of cohort_shard_rejected_requests_total).
enum class Rejection {
  kMalformed,      // not a parseable part
  kWrongRank,      // a stream's push claiming another worker's rank, or a rank out of range
  kNotReady,       // before rank 0 finished initialising the shard
  kUnknownPart,    // a part this shard does not hold (different models or partition maps)
  kWrongSize,      // not the part's byte count
  kStaleVersion,   // computed on an older version than the part's (dist_sync)
  kFutureVersion,  // computed on a version the part has not reached
  kDuplicate,      // a second push of one version from one worker
  kRolledBack,     // on a stream opened before the shard rolled back (another shard died)
  kNonFinite,      // a gradient (or statistic) holding NaN or an infinity
  kStaleGeneration,  // made in another membership generation (an elastic job's workers changed)
};
constexpr int kNumRejections = 11;
absl::string_view RejectionName(Rejection reason);

// A shard's series (ProcessMetrics labels on each).
struct ShardMetrics {
  explicit ShardMetrics(ProcessMetrics& process);

  void Reject(Rejection reason) { rejected[static_cast<int>(reason)]->Increment(); }

  prometheus::Counter& received_bytes;  // pushes' part bytes, headers included
  prometheus::Counter& sent_bytes;      // answers' part bytes
  prometheus::Counter& received_messages;  // push messages (a fusion of parts, or one part)
  prometheus::Counter& received_parts;     // the parts they carried
  prometheus::Counter& pushes_applied;  // pushes that went into an update
  prometheus::Histogram& apply_seconds;  // one optimizer update of one part
  prometheus::Gauge& pulls_waiting;     // pushed parts whose new value waits for other workers
  prometheus::Gauge& parameter_version;  // updates applied to the most updated part
  prometheus::Counter* rejected[kNumRejections];  // by Rejection
  prometheus::Histogram& checkpoint_seconds;  // encoding and writing one checkpoint
  prometheus::Gauge& checkpoint_bytes;        // the last checkpoint's file
  prometheus::Gauge& checkpoint_step;         // the step of the last checkpoint written
  prometheus::Counter& checkpoint_failures;   // writes that failed (disk full...)
  prometheus::Counter& checkpoints_dropped;   // skipped: the previous one was still writing
  prometheus::Gauge& resumed_step;            // the checkpoint step this process started from
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_METRICS_H_
