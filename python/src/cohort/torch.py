"""Your PyTorch script on Cohort, as with Horovod or BytePS:

    import cohort.torch as ct
    ct.init()                                     # joins the job (launch -n W -s S -- python3 ...)
    optimizer = ct.DistributedOptimizer(optimizer, model.named_parameters())
    ct.broadcast_parameters(model.state_dict())   # every rank starts from rank 0's values

The optimizer pushes each gradient as autograd produces it (a hook per parameter), so the
exchange overlaps the rest of backward; step() waits for the last ones. Two modes:

- gradient averaging (default, as Horovod): the shards average the workers' gradients (summed
  in rank order, so every rank gets the same bits) and the local optimizer steps on the mean;
- server_optimizer=True (as MXNet's dist_sync): the shards run the optimizer (torch's SGD or
  Adam, with its hyperparameters) and step() writes the values they produced into the
  parameters; the local optimizer never steps.

Every key is registered before the first exchange: create the DistributedOptimizer before
broadcast_parameters. One backward per step; the gradients are the mean over each worker's
local batch, as usual.
"""

import time

import torch

import cohort
from cohort import kvstore as _kvstore

_store = None
_next_key = 0


def init(kv_store="dist_sync"):
    """Joins the job the launcher describes (COHORT_* variables); "local" trains alone.
    Called by the other functions when needed."""
    global _store
    if _store is None:
        _store = _kvstore.create(kv_store)
        # The kvstore wants an update rule before its first key; averaged keys use none, and a
        # DistributedOptimizer with server_optimizer=True sets its own.
        _store.set_optimizer("sgd", lr=1.0)
    return _store


def rank():
    return init().rank


def size():
    return init().num_workers


def _keys(n):
    global _next_key
    first = _next_key
    _next_key += n
    return range(first, first + n)


def _register(store, key, value, auxiliary):
    try:
        store.init(key, value, auxiliary=auxiliary)
    except cohort.Error as e:
        if "after the first push or pull" in str(e):
            raise cohort.Error(f"{e}: create every DistributedOptimizer before "
                               "broadcast_parameters and before training") from None
        raise


def broadcast_parameters(params):
    """Sets every tensor of params (a state_dict, or (name, tensor) pairs) to rank 0's value.
    Floating-point tensors only go through the kvstore (as float32); others are left alone."""
    store = init()
    items = sorted(params.items()) if hasattr(params, "items") else list(params)
    tensors = [t for _, t in items if torch.is_tensor(t) and t.is_floating_point()]
    keys = _keys(len(tensors))
    buffers = []
    for key, t in zip(keys, tensors):
        buffer = t.detach().to(torch.float32).contiguous()
        _register(store, key, buffer, auxiliary=True)
        buffers.append(buffer)
    for key, t, buffer in zip(keys, tensors, buffers):
        store.pull(key, buffer)
        with torch.no_grad():
            t.copy_(buffer)


def _update_rule(optimizer):
    """The shards' rule for a torch optimizer: SGD (momentum, weight decay) or Adam."""
    group = optimizer.param_groups[0]
    if len(optimizer.param_groups) > 1:
        raise cohort.Error("server_optimizer=True takes an optimizer with one parameter group")
    if isinstance(optimizer, torch.optim.SGD):
        if group.get("nesterov") or group.get("dampening", 0) != 0:
            raise cohort.Error("server_optimizer=True: the shards' SGD has no nesterov or "
                               "dampening")
        return dict(optimizer="sgd", lr=group["lr"], momentum=group.get("momentum", 0.0),
                    wd=group.get("weight_decay", 0.0))
    if isinstance(optimizer, torch.optim.Adam):
        if group.get("amsgrad"):
            raise cohort.Error("server_optimizer=True: the shards' Adam has no amsgrad")
        beta1, beta2 = group["betas"]
        return dict(optimizer="adam", lr=group["lr"], wd=group.get("weight_decay", 0.0),
                    beta1=beta1, beta2=beta2, eps=group["eps"])
    raise cohort.Error(f"server_optimizer=True: the shards run SGD or Adam, not "
                       f"{type(optimizer).__name__}")


class DistributedOptimizer:
    """Wraps a torch optimizer: step() after backward gives every rank the same update."""

    def __init__(self, optimizer, named_parameters, server_optimizer=False, lr_schedule=None,
                 batch_size=0):
        """batch_size: this worker's batch, for the images/sec of its metrics."""
        self.optimizer = optimizer
        self.server_optimizer = server_optimizer
        self.batch_size = batch_size
        self._steps = 0
        self._last_step = time.monotonic()
        store = init()
        self._store = store
        named = list(named_parameters)
        names = [n for n, _ in named]
        if len(set(names)) != len(names):
            raise cohort.Error("named_parameters holds a name twice")
        self._params = [p for _, p in named if p.requires_grad]
        if server_optimizer:
            store.set_optimizer(**_update_rule(optimizer), **(lr_schedule or {}))
        self._keys = list(_keys(len(self._params)))
        # What each key's exchange writes: the mean gradient, or the shards' new value.
        self._out = []
        for key, p in zip(self._keys, self._params):
            value = p.detach().to(torch.float32).contiguous()
            _register(store, key, value if server_optimizer else torch.zeros_like(value),
                      auxiliary=not server_optimizer)
            self._out.append(torch.empty_like(value))
        self._handles = {}
        self._accumulators = []
        for i, p in enumerate(self._params):
            # The gradient accumulator's hook runs once p.grad holds this backward's gradient.
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_hook(i))
            self._accumulators.append(accumulator)  # keeps it (and its hook) alive

    def _make_hook(self, i):
        def hook(*_):
            self._start(i)
        return hook

    def _start(self, i):
        if i in self._handles:
            raise cohort.Error(f"parameter {i}: a second backward before step(); Cohort's "
                               "DistributedOptimizer takes one backward per step")
        p = self._params[i]
        grad = p.grad.detach()
        if grad.dtype != torch.float32 or not grad.is_contiguous():
            grad = grad.to(torch.float32).contiguous()
        self._handles[i] = (self._store.pushpull(self._keys[i], grad, self._out[i]), grad)

    def synchronize(self):
        """Waits for every exchange; parameters without a gradient this step push zeros.
        Returns the seconds spent waiting."""
        for i, p in enumerate(self._params):
            if i not in self._handles:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                self._start(i)
        start = time.monotonic()
        for i in range(len(self._params)):
            self._handles.pop(i)[0].wait()
        return time.monotonic() - start

    def step(self, closure=None):
        if closure is not None:
            raise cohort.Error("DistributedOptimizer.step takes no closure")
        waited = self.synchronize()
        with torch.no_grad():
            for p, out in zip(self._params, self._out):
                if self.server_optimizer:
                    p.copy_(out)
                else:
                    p.grad.copy_(out)
        if not self.server_optimizer:
            self.optimizer.step()
        now = time.monotonic()
        self._steps += 1
        self._store.record_step(self._steps, images=self.batch_size,
                                step_seconds=now - self._last_step, comm_seconds=waited,
                                lr=self.optimizer.param_groups[0]["lr"])
        self._last_step = now

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state)


__all__ = ["DistributedOptimizer", "broadcast_parameters", "init", "rank", "size"]
