#include "trainer/ops/cuda/replica_exchange.h"

#include "trainer/base/check.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/elem_of.h"
#include "trainer/ops/cuda/kernels.h"

namespace cohort::cuda {
namespace {

// Makes `device` the calling thread's current GPU for its scope (kernels, streams and events
// are made and launched on the current one), then the one before.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    COHORT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) COHORT_CUDA_CHECK(cudaSetDevice(device));
    device_ = device;
  }
  ~ScopedDevice() {
    if (previous_ != device_) COHORT_CUDA_CHECK(cudaSetDevice(previous_));
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0, device_ = 0;
};

// An event of the current GPU, recorded once on `stream` so that the first wait on it returns.
cudaEvent_t RecordedEvent(cudaStream_t stream) {
  cudaEvent_t e;
  COHORT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  COHORT_CUDA_CHECK(cudaEventRecord(e, stream));
  return e;
}

}  // namespace

DeviceReplicaExchange::DeviceReplicaExchange(std::vector<CudaContext*> contexts,
                                             std::vector<std::vector<ParameterTensors>> params)
    : contexts_(std::move(contexts)) {
  const size_t replicas = contexts_.size();
  COHORT_CHECK(replicas >= 1 && replicas <= kMaxReplicaTerms && params.size() == replicas,
               "%zu GPU replicas with %zu parameter lists (at most %d)", replicas, params.size(),
               kMaxReplicaTerms);
  {
    ScopedDevice first(first_device());
    COHORT_CUDA_CHECK(cudaStreamCreateWithFlags(&reduce_stream_, cudaStreamNonBlocking));
    // Peer copies go straight between GPUs that reach each other (else through the host).
    for (size_t r = 1; r < replicas; ++r) {
      const int peer = contexts_[r]->device();
      int can = 0;
      if (peer == first_device() ||
          cudaDeviceCanAccessPeer(&can, first_device(), peer) != cudaSuccess || !can ||
          cudaDeviceEnablePeerAccess(peer, 0) != cudaSuccess) {
        // Already enabled, or no direct path: neither is an error, and neither may surface at
        // the next launch check.
        cudaGetLastError();
      }
    }
  }
  const size_t keys = params[0].size();
  slots_.resize(keys);
  for (size_t k = 0; k < keys; ++k) {
    Slot& s = slots_[k];
    const Tensor& value = *params[0][k].value;
    for (size_t r = 0; r < replicas; ++r) {
      const ParameterTensors& p = params[r][k];
      COHORT_CHECK(p.value->shape() == value.shape() && p.value->dtype() == value.dtype(),
                   "replica %zu's parameter %zu is %s, replica 0's %s", r, k,
                   p.value->shape().ToString().c_str(), value.shape().ToString().c_str());
      s.params.push_back(p);
      s.copies.emplace_back(r == 0 ? Shape{0} : value.shape(), value.dtype(),
                            contexts_[0]->allocator());
      s.device_f32.emplace_back(value.dtype() == DType::kF32 ? Shape{0} : value.shape(),
                                DType::kF32, contexts_[r]->allocator());
    }
    s.sum = Tensor(value.shape(), DType::kF32, contexts_[0]->allocator());
    s.host_grad = Tensor(value.shape(), DType::kF32, PinnedAllocator());
    s.host_value = Tensor(value.shape(), DType::kF32, PinnedAllocator());
  }
  // Each event belongs to the GPU of the stream it is recorded on.
  for (size_t r = 0; r < replicas; ++r) {
    ScopedDevice device(contexts_[r]->device());
    for (Slot& s : slots_) {
      s.grad_done.push_back(RecordedEvent(contexts_[r]->stream()));
      s.value_read.push_back(RecordedEvent(contexts_[r]->stream()));
    }
  }
  ScopedDevice first(first_device());
  for (Slot& s : slots_) {
    s.grads_read = RecordedEvent(reduce_stream_);
    s.sum_copied = RecordedEvent(reduce_stream_);
  }
}

DeviceReplicaExchange::~DeviceReplicaExchange() {
  COHORT_CUDA_CHECK(cudaStreamSynchronize(reduce_stream_));
  for (CudaContext* ctx : contexts_) ctx->Synchronize();
  for (Slot& s : slots_) {
    for (cudaEvent_t e : s.grad_done) cudaEventDestroy(e);
    for (cudaEvent_t e : s.value_read) cudaEventDestroy(e);
    cudaEventDestroy(s.grads_read);
    cudaEventDestroy(s.sum_copied);
  }
  cudaStreamDestroy(reduce_stream_);
}

void DeviceReplicaExchange::GradientDone(int r, int64_t key) {
  COHORT_CUDA_CHECK(cudaEventRecord(slots_[key].grad_done[r], contexts_[r]->stream()));
}

void DeviceReplicaExchange::Reduce(int64_t key, absl::Span<const float> weights) {
  Slot& s = slots_[key];
  COHORT_CHECK(weights.size() == contexts_.size(), "%zu weights for %zu replicas",
               weights.size(), contexts_.size());
  ScopedDevice first(first_device());
  ReplicaTerms terms;
  terms.count = static_cast<int>(contexts_.size());
  for (size_t r = 0; r < contexts_.size(); ++r) {
    COHORT_CUDA_CHECK(cudaStreamWaitEvent(reduce_stream_, s.grad_done[r], 0));
    const Tensor& grad = *s.params[r].grad;
    terms.w[r] = weights[r];
    terms.g[r] = grad.raw();
    if (r == 0) continue;
    COHORT_CUDA_CHECK(cudaMemcpyPeerAsync(s.copies[r].raw(), first_device(), grad.raw(),
                                          contexts_[r]->device(), grad.nbytes(), reduce_stream_));
    terms.g[r] = s.copies[r].raw();
  }
  const Tensor& g0 = *s.params[0].grad;
  COHORT_CUDA_CHECK(WeightedSumToF32(terms, ElemOf(g0.dtype()), g0.numel(),
                                     s.sum.data<float>(), reduce_stream_));
  COHORT_CUDA_CHECK(cudaEventRecord(s.grads_read, reduce_stream_));
  COHORT_CUDA_CHECK(cudaMemcpyAsync(s.host_grad.raw(), s.sum.raw(), s.sum.nbytes(),
                                    cudaMemcpyDeviceToHost, reduce_stream_));
  COHORT_CUDA_CHECK(cudaEventRecord(s.sum_copied, reduce_stream_));
}

bool DeviceReplicaExchange::GradientArrived(int64_t key) {
  return EventDone(slots_[key].sum_copied);
}

const Tensor& DeviceReplicaExchange::HostGradient(int64_t key) {
  Slot& s = slots_[key];
  COHORT_CUDA_CHECK(cudaEventSynchronize(s.sum_copied));
  return s.host_grad;
}

Tensor* DeviceReplicaExchange::HostValue(int64_t key) {
  Slot& s = slots_[key];
  for (cudaEvent_t read : s.value_read) COHORT_CUDA_CHECK(cudaEventSynchronize(read));
  return &s.host_value;
}

void DeviceReplicaExchange::ReceiveValue(int r, int64_t key) {
  Slot& s = slots_[key];
  const cudaStream_t stream = contexts_[r]->stream();
  Tensor& value = *s.params[r].value;
  // The reduction must have read this replica's gradient before its next backward rewrites it.
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(stream, s.grads_read, 0));
  Tensor& f32 = s.device_f32[r];
  void* dst = f32.empty() ? value.raw() : f32.raw();
  COHORT_CUDA_CHECK(cudaMemcpyAsync(dst, s.host_value.raw(), s.host_value.nbytes(),
                                    cudaMemcpyHostToDevice, stream));
  COHORT_CUDA_CHECK(cudaEventRecord(s.value_read[r], stream));
  if (!f32.empty()) {
    COHORT_CUDA_CHECK(Cast(dst, Elem::kF32, value.raw(), ElemOf(value.dtype()), value.numel(),
                           stream));
  }
}

}  // namespace cohort::cuda
