#include "trainer/gpu/step_graph.h"

#include "absl/strings/str_cat.h"
#include "trainer/ops/cuda/cuda_check.h"

namespace cohort::cuda {

StepGraph::StepGraph(CudaContext* ctx) : ctx_(ctx) {}

StepGraph::~StepGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

absl::Status StepGraph::Run(const std::function<void()>& queue) {
  if (exec_ == nullptr) {
    // Thread-local capture: a call of this thread that the capture cannot hold (an
    // allocation, a wait) fails instead of running outside it.
    cudaError_t err = cudaStreamBeginCapture(ctx_->stream(), cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess) {
      queue();
      err = cudaStreamEndCapture(ctx_->stream(), &graph_);
    }
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec_, graph_, 0);
    if (err != cudaSuccess) {
      cudaGetLastError();
      if (graph_ != nullptr) cudaGraphDestroy(graph_);
      graph_ = nullptr;
      exec_ = nullptr;
      return absl::FailedPreconditionError(absl::StrCat(
          "cuda:", ctx_->device(), ": the step could not be captured as a CUDA graph (",
          cudaGetErrorString(err), "): it waits for the GPU, allocates or reads host data as "
          "it is queued; run it without the graph"));
    }
  }
  COHORT_CUDA_CHECK(cudaGraphLaunch(exec_, ctx_->stream()));
  return absl::OkStatus();
}

}  // namespace cohort::cuda
