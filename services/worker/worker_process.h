#ifndef COHORT_SERVICES_WORKER_WORKER_PROCESS_H_
#define COHORT_SERVICES_WORKER_WORKER_PROCESS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "services/common/http_server.h"
#include "services/common/metrics.h"
#include "services/membership/member_session.h"
#include "services/worker/job_kvstore.h"
#include "services/worker/worker_metrics.h"

namespace cohort {

// What a worker process holds besides its kvstore, for the worker binary and for training
// programs of other languages (the Python package): its membership of the job, and the
// worker's metrics (cohort_worker_*) served on HTTP at job.metrics_bind (with the port written
// to job.metrics_port_file) and reported to the scheduler's status page. Thread-compatible.
class WorkerProcess {
 public:
  // Joins the job as a worker (threads: its compute threads, for the scheduler's check of
  // oversubscribed hosts) and serves /metrics on job.metrics_port (0: one the system picks).
  // An error says what failed; a member that joined leaves saying it.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Join(const JobOptions& job,
                                                            int threads);
  ~WorkerProcess() = default;

  MemberSession* member() { return session_.get(); }
  // Fed one StepReport per training step (TrainingObserver).
  WorkerMetrics* metrics() { return &metrics_; }
  int metrics_port() const { return http_->port(); }
  const char* metrics_scheme() const { return http_->scheme(); }

 private:
  explicit WorkerProcess(std::unique_ptr<MemberSession> session,
                         std::shared_ptr<const TransportSecurity> security);

  std::unique_ptr<MemberSession> session_;
  ProcessMetrics process_;
  WorkerMetrics metrics_;
  std::unique_ptr<HttpServer> http_;  // the last to start, the first to stop
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_WORKER_PROCESS_H_
