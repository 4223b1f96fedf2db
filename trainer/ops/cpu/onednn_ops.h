#ifndef COHORT_TRAINER_OPS_CPU_ONEDNN_OPS_H_
#define COHORT_TRAINER_OPS_CPU_ONEDNN_OPS_H_

// The oneDNN backend's ops, one file a family (private to //trainer/ops/cpu:onednn_backend):
// OnednnBackend makes them through these, every op of a backend sharing its context.

#include <memory>

#include "trainer/ops/cpu/onednn_context.h"
#include "trainer/ops/op.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace onednn {

// onednn_conv.cc
std::unique_ptr<Op> MakeConv2d(std::shared_ptr<Ctx> ctx, const Conv2dSpec& spec);
// onednn_pool.cc
std::unique_ptr<Op> MakePool2d(std::shared_ptr<Ctx> ctx, PoolKind kind, const Pool2dSpec& spec);
// onednn_batch_norm.cc; relu: the ReLU after it fused.
std::unique_ptr<Op> MakeBatchNorm(std::shared_ptr<Ctx> ctx, const BatchNormSpec& spec, bool relu);
// onednn_elementwise.cc
std::unique_ptr<Op> MakeAdd(std::shared_ptr<Ctx> ctx);
std::unique_ptr<Op> MakeAddRelu(std::shared_ptr<Ctx> ctx);
std::unique_ptr<Op> MakeRelu(std::shared_ptr<Ctx> ctx);
std::unique_ptr<Op> MakeDropout(std::shared_ptr<Ctx> ctx, const DropoutSpec& spec);
// onednn_layout_ops.cc; copy, copies and plain_copies: the host ops they stand for on
// activations held blocked.
std::unique_ptr<Op> MakeSubsamplePad(std::shared_ptr<Ctx> ctx, const SubsamplePadSpec& spec);
std::unique_ptr<Op> MakeFlatten(std::shared_ptr<Ctx> ctx, std::unique_ptr<Op> copy);
std::unique_ptr<Op> MakeConcat(std::shared_ptr<Ctx> ctx, std::unique_ptr<Op> copies,
                               std::unique_ptr<Op> plain_copies);
// onednn_linear.cc
std::unique_ptr<Op> MakeLinear(std::shared_ptr<Ctx> ctx);
std::unique_ptr<Op> MakeSoftmaxCrossEntropy(std::shared_ptr<Ctx> ctx);

}  // namespace onednn
}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_CPU_ONEDNN_OPS_H_
