"""Your PyTorch script on Cohort, as with Horovod or BytePS: a Horovod script runs with its
import line changed to `import cohort.torch as hvd`.

    import cohort.torch as hvd
    hvd.init()                                    # joins the job (cohortrun -np W python ...)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    loss = hvd.allreduce(loss, name="avg_loss")    # a metric averaged over the ranks

The optimizer pushes each gradient as autograd produces it (a hook per parameter), so the
exchange overlaps the rest of backward; step() waits for the last ones. A CUDA tensor's gradient
is copied into pinned host memory on a stream of its own as it is produced, and pushed once
that copy is done; the mean (or value) goes back to the GPU the same way. Two modes:

- gradient averaging (default, as Horovod): the shards average the workers' gradients (summed
  in rank order, so every rank gets the same bits) and the local optimizer steps on the mean;
- server_optimizer=True (as MXNet's dist_sync): the shards run the optimizer (torch's SGD or
  Adam, with its hyperparameters) and step() writes the values they produced into the
  parameters; the local optimizer never steps. The shards update at the optimizer's learning
  rate of each step, so a torch LR scheduler drives them, unless `lr_schedule` gives them a
  schedule of their own.

Every key of the kvstore is registered before the first exchange: make every
DistributedOptimizer before training. The gradients are the mean over each worker's local
batch, as usual.
allreduce, allgather, broadcast and the object calls are for small things (cohort.collectives);
every rank makes them in the same order.
"""

import time

import torch

import cohort
from cohort import collectives as _collectives
from cohort import kvstore as _kvstore
from cohort.collectives import Adasum, Average, Handle, Max, Min, Product, Sum  # noqa: F401
from cohort.host_copies import HostCopies
from cohort.sync_batch_norm import SyncBatchNorm

_store = None
_places = None  # local_rank, local_size, cross_rank, cross_size: of the workers now
_next_key = 0
_optimizers = []  # every DistributedOptimizer made, for join() and the elastic reset


def init(comm=None, process_sets=None, kv_store="dist_sync"):
    """Joins the job the launcher describes (COHORT_* variables); "local" trains alone. Called
    by the other functions when needed."""
    global _store
    if comm is not None or process_sets is not None:
        raise cohort.Error("init(comm=, process_sets=): a Cohort job's workers are the ones its "
                           "launcher started, all in one set")
    if _store is None:
        store = _kvstore.create(kv_store)
        # The kvstore wants an update rule before its first key; averaged keys use none, and a
        # DistributedOptimizer with server_optimizer=True sets its own.
        store.set_optimizer("sgd", lr=1.0)
        _store = store
    return _store


def _place():
    """(local_rank, local_size, cross_rank, cross_size) from the hosts the workers registered
    from (the scheduler's view: no exchange, so a worker joining an elastic job asks it too)."""
    global _places
    if _places is None:
        me, hosts = init().worker_hosts()
        host = hosts[me]
        order = list(dict.fromkeys(hosts))  # hosts by their first rank
        _places = (hosts[:me].count(host), hosts.count(host), order.index(host), len(order))
    return _places


def _rejoin():
    """Every worker of the job's current generation at once (hvd.elastic.run): the kvstore
    recovers from its last failure (the workers regroup), or commits, or catches up with a
    change of workers it heard of; every DistributedOptimizer starts its step afresh from the
    keys' versions there (a pull that fails as a shard died meanwhile is recovered from in
    turn)."""
    global _places
    if not _optimizers:
        raise cohort.Error("hvd.elastic.run: make the DistributedOptimizer before calling the "
                           "function (the workers regroup on its keys)")
    store = init()
    store.recover()
    while True:
        try:
            for optimizer in _optimizers:
                optimizer._reset()
            break
        except cohort.Error:
            store.recover()
    store.start_step()  # checks every key came back to the same step
    _places = None


def is_initialized():
    return _store is not None


def shutdown():
    """Nothing to stop: the worker leaves the job as the program exits (its exit status is its
    verdict)."""


def rank():
    return init().rank


def size():
    return init().num_workers


def local_rank():
    """This worker's rank among the job's workers on its host (for torch.cuda.set_device)."""
    return _place()[0]


def local_size():
    return _place()[1]


def cross_rank():
    """Its host's rank among the job's hosts, in the order of their first workers."""
    return _place()[2]


def cross_size():
    return _place()[3]


def barrier():
    """Returns when every rank has called it (an exchange of nothing: it may come before the
    DistributedOptimizer registers its keys)."""
    init().exchange(b"")


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """The mean (op=Sum, Min, Max, Product: that) over the ranks of tensor, as a new tensor;
    compression=Compression.fp16 or bf16 sends it in 16 bits."""
    return _collectives.allreduce(init(), [tensor], average, op, prescale_factor,
                                  postscale_factor, process_set, compression, name)[0]


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    with torch.no_grad():
        tensor.copy_(allreduce(tensor, average, name, None, op, prescale_factor,
                               postscale_factor, process_set))
    return tensor


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    return Handle(allreduce(tensor, average, name, None, op, prescale_factor, postscale_factor,
                            process_set))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    return Handle(allreduce_(tensor, average, name, op, prescale_factor, postscale_factor,
                             process_set))


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Each of tensors reduced over the ranks, in one exchange."""
    return _collectives.allreduce(init(), list(tensors), average, op, prescale_factor,
                                  postscale_factor, process_set, compression, name)


def allgather(tensor, name=None, process_set=None):
    """Every rank's tensor concatenated along the first dimension, by rank."""
    return _collectives.allgather(init(), tensor, process_set)


def allgather_async(tensor, name=None, process_set=None):
    return Handle(allgather(tensor, name, process_set))


def allgather_object(obj, name=None, process_set=None):
    """Every rank's obj (picklable), by rank."""
    _collectives.check_no_process_set(process_set)
    return _collectives.gather_objects(init(), obj)


def broadcast(tensor, root_rank, name=None, process_set=None):
    """root_rank's tensor, as a new tensor."""
    return _collectives.broadcast(init(), tensor, root_rank, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    with torch.no_grad():
        tensor.copy_(broadcast(tensor, root_rank, name, process_set))
    return tensor


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    return Handle(broadcast(tensor, root_rank, name, process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    return Handle(broadcast_(tensor, root_rank, name, process_set))


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """root_rank's obj (picklable) on every rank."""
    _collectives.check_no_process_set(process_set)
    return _collectives.broadcast_object(init(), obj, root_rank)


def join(device=-1):
    """This rank has no more data: until every rank has joined, it takes part in the others'
    steps with zero gradients (each DistributedOptimizer's mean is over all ranks, as Horovod's)
    and its parameters follow theirs. Returns the rank that joined last (the most steps done).
    Collectives (allreduce of a metric, broadcast) wait for every rank: make them before a rank
    joins or after join() returns."""
    store = init()
    mine = [o._steps for o in _optimizers]
    # dist_async: no rank waits for another's gradients; dist_sync: step with the others.
    if store.type != "dist_async":
        while _optimizers and not all([o._step_joined() for o in _optimizers]):
            pass
    done = _collectives.gather_objects(store, mine)
    return max(range(len(done)), key=lambda r: (done[r], r))


def synchronize(handle):
    """The result of an asynchronous call (Cohort's are done when they return)."""
    return handle.result


def poll(handle):
    return True


class Compression:
    """Horovod's gradient compression settings. Cohort compresses on the wire for the whole
    job (cohortrun --gradient_compression=fp16|bf16): a
    DistributedOptimizer given fp16 or bf16 checks the job does."""
    none = "none"
    fp16 = "fp16"
    bf16 = "bf16"


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
            raise cohort.Error(f"{e}: make every DistributedOptimizer before training") from None
        raise


def broadcast_parameters(params, root_rank=0):
    """Sets every tensor of params (a state_dict, or (name, tensor) pairs) to root_rank's
    value, bit for bit, before or after the DistributedOptimizer is made."""
    items = sorted(params.items()) if hasattr(params, "items") else list(params)
    _collectives.broadcast_tensors(init(), [(n, t) for n, t in items if torch.is_tensor(t)],
                                   root_rank)


def broadcast_optimizer_state(optimizer, root_rank=0, model=None):
    """Gives every rank root_rank's optimizer state (its state_dict: hyperparameters, momenta,
    step counts)."""
    state = broadcast_object(optimizer.state_dict(), root_rank)
    if rank() != root_rank:
        optimizer.load_state_dict(state)


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


class _DistributedOptimizer(torch.optim.Optimizer):
    """What DistributedOptimizer adds to a torch optimizer's class (made as Horovod makes it:
    a subclass of the wrapped optimizer's class over its parameter groups, so LR schedulers,
    param_groups and state_dict are torch's)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 server_optimizer, lr_schedule, batch_size):
        super(self.__class__, self).__init__(params)
        if op != Average:
            raise cohort.Error(f"DistributedOptimizer(op={op!r}): the shards average the "
                               "gradients (op=hvd.Average)")
        _check_compression(compression)
        if backward_passes_per_step < 1:
            raise cohort.Error("backward_passes_per_step must be at least 1")
        self.server_optimizer = server_optimizer
        self._lr_schedule = lr_schedule
        self._sent_lr = None  # the learning rate the shards were last told
        self.batch_size = batch_size
        self.backward_passes_per_step = backward_passes_per_step
        self._steps = 0
        self._last_step = time.monotonic()
        store = init()
        self._store = store
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            named = [(f"param.{i}", p) for i, p in enumerate(params)]
        else:
            named = list(named_parameters)
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                raise cohort.Error("named_parameters holds a name twice")
            unnamed = {id(p) for p in params} - {id(p) for _, p in named}
            if unnamed:
                raise cohort.Error(f"{len(unnamed)} parameter(s) of the optimizer are not in "
                                   "named_parameters")
        self._params = [p for _, p in named if p.requires_grad]
        # Whether this rank has joined (join()), exchanged with every step: the shards'
        # mean of it tells each rank how many have.
        self._joined = torch.zeros(1)
        self._joined_mean = torch.zeros(1)
        if server_optimizer:
            store.set_optimizer(**_update_rule(self), **(lr_schedule or {}))
        self._keys = list(_keys(len(self._params)))
        # What each key's exchange writes: the mean gradient, or the shards' new value; and
        # where a CUDA tensor's gradient is copied for its push. Pinned for CUDA tensors, so
        # that their copies run on a stream beside the computation.
        self._out = []
        self._host = []
        for key, p in zip(self._keys, self._params):
            value = p.detach().to("cpu", torch.float32).contiguous()
            _register(store, key, value if server_optimizer else torch.zeros_like(value),
                      auxiliary=not server_optimizer)
            pinned = p.is_cuda
            self._out.append(torch.empty_like(value, pin_memory=pinned))
            self._host.append(torch.empty_like(value, pin_memory=True) if pinned else None)
        self._copies = HostCopies(self._push)
        self._joined_key = _keys(1)[0]
        _register(store, self._joined_key, self._joined, auxiliary=True)
        self._handles = {}
        self._passes = [0] * len(self._params)  # backward passes since the last step
        self._synchronized = False
        self._should_synchronize = True
        self._accumulators = []
        for i, p in enumerate(self._params):
            # The gradient accumulator's hook runs once p.grad holds this backward's gradient.
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_hook(i))
            self._accumulators.append(accumulator)  # keeps it (and its hook) alive
        _optimizers.append(self)

    def _reset(self):
        """After the workers regrouped: nothing in flight, no backward pass counted, every key
        pulled (the store goes on from the versions the shards answer)."""
        self._handles = {}
        self._copies.drop()
        self._passes = [0] * len(self._params)
        self._synchronized = False
        self._joined.fill_(0)
        self._last_step = time.monotonic()
        for key, out in zip(self._keys, self._out):
            self._store.pull(key, out)
        self._store.pull(self._joined_key, self._joined_mean)

    def _make_hook(self, i):
        def hook(*_):
            self._passes[i] += 1
            if self._passes[i] > self.backward_passes_per_step:
                raise cohort.Error(
                    f"parameter {i}: {self._passes[i]} backward passes before step(); this "
                    f"DistributedOptimizer takes backward_passes_per_step="
                    f"{self.backward_passes_per_step}")
            if self._passes[i] == self.backward_passes_per_step:
                self._start(i)
        return hook

    def _start(self, i):
        """Starts parameter i's exchange: pushed now, or for a CUDA tensor once its copy to
        host memory is done (a copy started here, or by an earlier gradient, may be done)."""
        if self.server_optimizer:
            self._follow_lr()
        grad = self._params[i].grad.detach()
        self._synchronized = False
        if grad.is_cuda:
            self._copies.start(i, grad, self._host[i])
        else:
            # The kvstore reads float32 in host memory: other dtypes (fp16, bf16) go through a
            # copy.
            self._push(i, grad.to(torch.float32).contiguous())
        self._copies.push_done()

    def _push(self, i, grad=None):
        """Pushes grad (by default the gradient copied to host memory) and pulls the mean or
        value of parameter i."""
        grad = self._host[i] if grad is None else grad
        self._handles[i] = (self._store.pushpull(self._keys[i], grad, self._out[i]), grad)

    def _follow_lr(self):
        """The shards update this step at the torch learning rate (an LR scheduler moves it),
        unless they run an lr_schedule of their own."""
        lr = self.param_groups[0]["lr"]
        if lr == self._sent_lr:
            return
        if self._lr_schedule:
            if self._sent_lr is not None:
                raise cohort.Error(
                    f"server_optimizer=True with lr_schedule: the shards follow that schedule, "
                    f"not the optimizer's learning rate (now {lr}, was {self._sent_lr}); drop "
                    "lr_schedule= to have them follow a torch LR scheduler")
        else:
            self._store.set_learning_rate(lr)
        self._sent_lr = lr

    def synchronize(self):
        """Waits for every exchange (parameters without a gradient this step push zeros) and,
        averaging gradients, writes each mean into its .grad. Returns the seconds spent
        waiting."""
        return self._synchronize(exchange_joined=True)

    def _synchronize(self, exchange_joined):
        for i, p in enumerate(self._params):
            if i not in self._handles:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                self._start(i)
        self._copies.push_done(wait=True)
        joined = (self._store.pushpull(self._joined_key, self._joined, self._joined_mean)
                  if exchange_joined else None)
        start = time.monotonic()
        for i in range(len(self._params)):
            self._handles.pop(i)[0].wait()
        if joined is not None:
            joined.wait()
        waited = time.monotonic() - start
        if not self.server_optimizer:
            with torch.no_grad():
                for p, out in zip(self._params, self._out):
                    # A CUDA tensor's copy is queued before the optimizer's kernels; out is
                    # written again only after the next gradient's copy, queued after them.
                    p.grad.copy_(out, non_blocking=True)
        self._synchronized = True
        return waited

    def _joined_ranks(self):
        """How many ranks had joined at the last synchronize()."""
        return round(float(self._joined_mean[0]) * self._store.num_workers)

    def _step_joined(self):
        """One step of a rank that joined: its flag alone first, so that when every rank has
        joined nobody pushes a gradient (the shards make no update); while some rank trains,
        zero gradients exchanged with its step and the local optimizer stepping on the mean,
        as the training ranks' does. Returns whether every rank has joined."""
        self._joined.fill_(1)
        try:
            self._store.pushpull(self._joined_key, self._joined, self._joined_mean).wait()
        finally:
            self._joined.fill_(0)
        if self._joined_ranks() == self._store.num_workers:
            return True
        for p in self._params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.zero_()
        self._synchronize(exchange_joined=False)
        self.step()
        return False

    def skip_synchronize(self):
        """A context in which step() does not synchronize: for a script that called
        synchronize() itself (to clip the averaged gradients, say)."""
        optimizer = self

        class _Skip:
            def __enter__(self):
                optimizer._should_synchronize = False

            def __exit__(self, *_):
                optimizer._should_synchronize = True
        return _Skip()

    def step(self, closure=None):
        waited = 0.0
        if self._should_synchronize and not self._synchronized:
            waited = self.synchronize()
        self._synchronized = False
        self._passes = [0] * len(self._params)
        loss = None
        if self.server_optimizer:
            if closure is not None:
                raise cohort.Error("server_optimizer=True: step() takes no closure")
            with torch.no_grad():
                for p, out in zip(self._params, self._out):
                    p.copy_(out, non_blocking=True)
        else:
            loss = super(self.__class__, self).step(closure)
        now = time.monotonic()
        self._steps += 1
        self._store.record_step(self._steps, images=self.batch_size,
                                step_seconds=now - self._last_step, comm_seconds=waited,
                                lr=self.param_groups[0]["lr"])
        self._last_step = now
        return loss


def _check_compression(compression):
    if compression in (None, Compression.none):
        return
    if compression not in (Compression.fp16, Compression.bf16):
        raise cohort.Error(f"compression={compression!r}: Cohort has hvd.Compression.none, "
                           "fp16 and bf16")
    wire = init().gradient_compression
    if wire != compression:
        raise cohort.Error(
            f"compression=hvd.Compression.{compression}: Cohort compresses the gradients on the "
            f"wire for the whole job, and this job sends {wire}: start it with cohortrun "
            f"--gradient_compression={compression}")


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None,
                         server_optimizer=False, lr_schedule=None, batch_size=0):
    """optimizer, over the job: step() after backward gives every rank the same update. A
    torch.optim.Optimizer of optimizer's class, over its parameter groups (its state starts
    empty, as Horovod's). backward_passes_per_step: the gradients of that many backward passes
    accumulate before they are exchanged. batch_size: this worker's batch, for the images/sec
    of its metrics."""
    _collectives.check_no_process_set(process_set)
    if gradient_predivide_factor != 1.0 or groups is not None or num_groups:
        raise cohort.Error("gradient_predivide_factor, groups, num_groups: the shards average "
                           "every gradient as it comes; leave them at their defaults")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, server_optimizer, lr_schedule, batch_size)


def __getattr__(name):
    """hvd.elastic (cohort.elastic), imported when first used."""
    if name == "elastic":
        from cohort import elastic
        return elastic
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Adasum", "Average", "Compression", "DistributedOptimizer", "Handle", "Max", "Min",
           "Product", "Sum", "SyncBatchNorm", "allgather", "allgather_async", "allgather_object",
           "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "barrier",
           "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "broadcast_object",
           "broadcast_optimizer_state", "broadcast_parameters", "cross_rank", "cross_size",
           "grouped_allreduce", "init", "is_initialized", "join", "local_rank", "local_size",
           "poll",
           "rank", "shutdown", "size", "synchronize"]
