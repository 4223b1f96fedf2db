"""Batch normalisation over the job's global batch (Horovod's hvd.SyncBatchNorm): in training,
each rank normalises its part of the batch with the mean and variance of every rank's together,
and its backward pass takes every rank's share of the gradient sums, so W ranks with their parts
compute what one process would on the whole batch. Two exchanges at the scheduler a layer and
step (cohort.collectives: the statistics, then the gradient sums), each combined in rank order
so every rank holds the same bits. Ranks may hold different numbers of samples.
"""

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from cohort import collectives as _collectives
from cohort._cohort import Error


def _reduced_dims(x):
    return [0] + list(range(2, x.dim()))


def _per_channel(v, x):
    """v (C) shaped to broadcast over x (N, C, ...)."""
    return v.view([1, -1] + [1] * (x.dim() - 2))


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps, store):
        # x: (N, C, ...), this rank's part of the batch; weight, bias: (C) or None.
        dims = _reduced_dims(x)
        count = x.numel() // x.shape[1]
        mean = x.mean(dims)
        var = x.var(dims, unbiased=False)
        every = _collectives.gather_objects(
            store, (count, mean.detach().cpu(), var.detach().cpu()))
        total = sum(n for n, _, _ in every)
        global_mean = sum(n * m for n, m, _ in every) / total
        # The variance of the union: each part's own, and its mean's distance from the whole's.
        global_var = sum(n * (v + (m - global_mean) ** 2) for n, m, v in every) / total
        global_mean, global_var = global_mean.to(x.device), global_var.to(x.device)
        invstd = torch.rsqrt(global_var + eps)
        xhat = (x - _per_channel(global_mean, x)) * _per_channel(invstd, x)
        y = xhat
        if weight is not None:
            y = y * _per_channel(weight, x) + _per_channel(bias, x)
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.total = total
        ctx.store = store
        ctx.affine = weight is not None
        total_tensor = torch.tensor(total)
        ctx.mark_non_differentiable(global_mean, global_var, total_tensor)
        return y, global_mean, global_var, total_tensor

    @staticmethod
    def backward(ctx, dy, *_):
        xhat, invstd, weight = ctx.saved_tensors
        dims = _reduced_dims(dy)
        sum_dy = dy.sum(dims)
        sum_dy_xhat = (dy * xhat).sum(dims)
        every = _collectives.gather_objects(
            ctx.store, (sum_dy.detach().cpu(), sum_dy_xhat.detach().cpu()))
        global_dy = sum(s for s, _ in every).to(dy.device)
        global_dy_xhat = sum(s for _, s in every).to(dy.device)
        scale = invstd if weight is None else invstd * weight
        dx = _per_channel(scale, dy) * (dy - _per_channel(global_dy / ctx.total, dy) -
                                        xhat * _per_channel(global_dy_xhat / ctx.total, dy))
        # The affine parameters' gradients are this rank's, as any parameter's: the
        # DistributedOptimizer averages them.
        if ctx.affine:
            return dx, sum_dy_xhat, sum_dy, None, None
        return dx, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """torch's BatchNorm (1d, 2d or 3d: input (N, C, ...)) with training statistics over every
    rank's batch. In evaluation, or in a job of one worker, it is the plain layer."""

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise Error(f"SyncBatchNorm takes (N, C, ...) input, got {x.dim()} dimension(s)")

    def forward(self, x):
        self._check_input_dim(x)
        from cohort import torch as hvd  # cohort.torch imports this module
        training = self.training or not self.track_running_stats
        if not training or hvd.size() == 1:
            return super().forward(x)
        momentum = self.momentum
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative average
                momentum = 1.0 / float(self.num_batches_tracked)
        y, mean, var, total = _SyncBatchNormFunction.apply(x, self.weight, self.bias, self.eps,
                                                           hvd.init())
        if self.track_running_stats:
            total = int(total)
            if total < 2:
                raise Error("SyncBatchNorm: the ranks together hold one value a channel; its "
                            "variance needs more than one")
            with torch.no_grad():
                self.running_mean.mul_(1 - momentum).add_(mean, alpha=momentum)
                self.running_var.mul_(1 - momentum).add_(var * total / (total - 1),
                                                         alpha=momentum)
        return y


__all__ = ["SyncBatchNorm"]
