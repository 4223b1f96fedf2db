#include "services/worker/worker_process.h"

#include <thread>
#include <utility>

namespace cohort {

WorkerProcess::WorkerProcess(std::unique_ptr<MemberSession> session,
                             std::shared_ptr<const TransportSecurity> security)
    : session_(std::move(session)),
      process_(session_->job_id(), "worker", session_->rank(), std::move(security)),
      metrics_(process_, [member = session_.get()](const v1::Progress& p) {
        member->SetProgress(p);
      }) {}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Join(const JobOptions& job,
                                                                  int threads) {
  MemberSessionOptions options = job.SessionOptions();
  options.threads = threads;
  options.cores = static_cast<int>(std::thread::hardware_concurrency());
  absl::StatusOr<std::unique_ptr<MemberSession>> session = MemberSession::Join(options);
  if (!session.ok()) return session.status();
  std::unique_ptr<WorkerProcess> worker(new WorkerProcess(*std::move(session), job.security));
  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      ServeMetrics(job.metrics_bind, job.metrics_port, job.metrics_port_file,
                   {worker->process_.Route()}, job.security);
  if (!http.ok()) {
    worker->session_->Leave(http.status());
    return http.status();
  }
  worker->http_ = *std::move(http);
  return worker;
}

}  // namespace cohort
