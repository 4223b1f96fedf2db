#ifndef COHORT_TRAINER_OPS_CUDA_CUDA_OPS_H_
#define COHORT_TRAINER_OPS_CUDA_CUDA_OPS_H_

// The CUDA backend's ops, one file a family (inside the backend: CudaBackend makes them through
// these, every op of a backend sharing its Shared state and running on its stream).

#include <memory>

#include "trainer/ops/cuda/cuda_backend.h"
#include "trainer/ops/op.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {

// conv_op.cc: cuDNN's legacy convolution API, its algorithms chosen by cudnnFind per input
// shape within the backend's precision (and, with deterministic, among the deterministic ones).
std::unique_ptr<Op> MakeConvOp(std::shared_ptr<CudaBackend::Shared> s, const Conv2dSpec& spec);
// pool_op.cc
std::unique_ptr<Op> MakePoolOp(std::shared_ptr<CudaBackend::Shared> s, PoolKind kind,
                               const Pool2dSpec& spec);
// batch_norm_op.cc; relu: the ReLU after it fused.
std::unique_ptr<Op> MakeBatchNormOp(std::shared_ptr<CudaBackend::Shared> s,
                                    const BatchNormSpec& spec, bool relu);
// elementwise_ops.cc
std::unique_ptr<Op> MakeAddOp(std::shared_ptr<CudaBackend::Shared> s);
std::unique_ptr<Op> MakeAddReluOp(std::shared_ptr<CudaBackend::Shared> s);
std::unique_ptr<Op> MakeConcatOp(std::shared_ptr<CudaBackend::Shared> s);
std::unique_ptr<Op> MakeReluOp(std::shared_ptr<CudaBackend::Shared> s);
std::unique_ptr<Op> MakeDropoutOp(std::shared_ptr<CudaBackend::Shared> s, const DropoutSpec& spec);
std::unique_ptr<Op> MakeSubsamplePadOp(std::shared_ptr<CudaBackend::Shared> s,
                                       const SubsamplePadSpec& spec);
// classifier_ops.cc; copy: the host op a flatten of a plain activation is.
std::unique_ptr<Op> MakeLinearOp(std::shared_ptr<CudaBackend::Shared> s);
std::unique_ptr<Op> MakeFlattenOp(std::shared_ptr<CudaBackend::Shared> s, std::unique_ptr<Op> copy);
std::unique_ptr<Op> MakeSoftmaxCrossEntropyOp(std::shared_ptr<CudaBackend::Shared> s);

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_CUDA_OPS_H_
