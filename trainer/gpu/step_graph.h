#ifndef COHORT_TRAINER_GPU_STEP_GRAPH_H_
#define COHORT_TRAINER_GPU_STEP_GRAPH_H_

#include <cuda_runtime.h>

#include <functional>

#include "absl/status/status.h"
#include "trainer/ops/cuda/cuda_context.h"

namespace cohort::cuda {

// A training step queued on a context's compute stream, captured once as a CUDA graph and then
// launched whole: one launch instead of one a kernel, for models whose steps the host's
// launches bound (LeNet, the CIFAR ResNets). What `queue` queues must be the same work on the
// same buffers at every step: shapes fixed and every buffer allocated (run steps without it
// first: cudnnFind, the model's plan), none freed or grown while the graph lives (the
// context's workspace included), no wait for the GPU (read the loss after Run), no host data
// read as the work is queued (a dropout mask) and no other stream. The learning rate and
// anything else passed to kernels by value are those of the captured step. Not thread-safe.
class StepGraph {
 public:
  explicit StepGraph(CudaContext* ctx);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // The first call captures what `queue` queues (nothing runs meanwhile) and launches it;
  // every later call launches the graph without calling `queue`. Returns once the launch is
  // queued. An error says why the capture failed (queue's work then did not run).
  absl::Status Run(const std::function<void()>& queue);
  bool captured() const { return exec_ != nullptr; }

 private:
  CudaContext* const ctx_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_GPU_STEP_GRAPH_H_
