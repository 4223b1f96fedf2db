"""The kvstore of a Cohort job, as MXNet's: every parameter has an integer key; a worker
pushes gradients and pulls the values the shards' optimizer produced.

    kv = cohort.kvstore.create("dist_sync")      # or "dist_async", or "local" (this process)
    kv.set_optimizer("sgd", lr=0.1, steps_per_epoch=100)
    kv.init(0, w)                                # rank 0's value wins; then every rank pulls
    kv.pull(0, out=w)
    kv.pushpull(0, grad, out=w).wait()           # split-phase: overlap it with other work

Arrays are numpy arrays or CPU torch tensors, float32 and C-contiguous, read and written in
place (no copies): an array handed to pushpull belongs to the kvstore until its wait()
returns. Errors raise cohort.Error with the message of the C++ side.
"""

import os
import sys
import traceback

from cohort import _cohort
from cohort._cohort import Error


def _array(x):
    """x itself, or for a torch tensor its memory (torch tensors do not speak the buffer
    protocol): a contiguous one's address, else a numpy view, which the kvstore refuses saying
    why."""
    if type(x).__module__.startswith("torch"):
        if x.device.type != "cpu":
            raise Error(f"a tensor on {x.device}: the kvstore takes CPU tensors")
        if str(x.dtype) != "torch.float32":
            raise Error(f"a {x.dtype} tensor: the kvstore takes float32 (convert with .float(); "
                        "cohort.torch's DistributedOptimizer does)")
        if x.is_contiguous() and x.numel() > 0:
            return _cohort.Memory(x.data_ptr(), x.shape, x)
        return x.detach().numpy()
    return x


class Handle:
    """A pushpull in flight; wait() returns once its output holds the pulled value."""

    def __init__(self, store, key):
        self._store, self.key = store, key

    def wait(self):
        self._store.wait(self.key)


class KVStore:
    def __init__(self, store):
        self._store = store

    @property
    def type(self):
        return self._store.type

    @property
    def rank(self):
        return self._store.rank

    @property
    def gradient_compression(self):
        """How the job's pushes go on the wire: "none", "fp16", "bf16" or "2bit:T"
        (cohortrun --gradient_compression)."""
        return self._store.gradient_compression

    @property
    def num_workers(self):
        return self._store.num_workers

    def set_optimizer(self, optimizer="sgd", lr=0.01, momentum=0.0, wd=0.0,
                      lr_schedule="constant", epochs=1, steps_per_epoch=1, warmup_epochs=0.0,
                      beta1=0.9, beta2=0.999, eps=1e-8):
        """The update rule the shards run ("sgd" or "adam"), with the learning-rate schedule
        ("constant", "step", "cosine", "poly") over epochs of steps_per_epoch global steps.
        Every rank calls it with the same values, before init."""
        self._store.set_optimizer(optimizer, lr, momentum, wd, lr_schedule, epochs,
                                  steps_per_epoch, warmup_epochs, beta1, beta2, eps)

    def set_learning_rate(self, lr):
        """The rate of this worker's pushes from the next one on, in place of the schedule's
        (None: the schedule's again): for a script whose own scheduler sets it. Every rank sets
        the same rate at the same step."""
        self._store.set_learning_rate(-1.0 if lr is None else lr)

    def init(self, key, value, auxiliary=False):
        """Registers key with its initial value (rank 0's is kept). auxiliary: state the
        shards average without an optimizer (batch-norm statistics)."""
        self._store.init(key, _array(value), auxiliary)

    def push(self, key, grad):
        """Pushes grad as key's next step (grad may be reused on return)."""
        self._store.push(key, _array(grad))

    def pull(self, key, out):
        """Writes key's value into out, after the last push's step."""
        self._store.pull(key, _array(out))

    def pushpull(self, key, grad, out):
        """Pushes grad and pulls the value it produces into out, without waiting."""
        self._store.pushpull(key, _array(grad), _array(out))
        return Handle(self._store, key)

    def wait(self, key):
        self._store.wait(key)

    def barrier(self):
        """Returns when every worker has reached it."""
        self._store.barrier()

    def exchange(self, payload):
        """A barrier that gathers: every worker's payload (bytes), by rank, once every worker
        has called it (the workers together bring at most 12 MiB)."""
        return self._store.exchange(payload)

    @property
    def metrics_port(self):
        """Where this worker serves /metrics (None for "local")."""
        return self._store.metrics_port

    def record_step(self, step, images, step_seconds, comm_seconds=0.0, loss=0.0, lr=0.0,
                    epoch=0):
        """Counts one training step in the worker's metrics (cohort_worker_*: the dashboards'
        images/sec and communication overhead) and the scheduler's status page. images: this
        worker's batch; comm_seconds: the part of the step spent waiting for the kvstore.
        cohort.torch's DistributedOptimizer does this at every step."""
        self._store.record_step(step, epoch, images, step_seconds, comm_seconds, loss, lr)

    def recover(self):
        """After a call raised: the store recovers from its failure (a dead shard came back,
        an elastic job's workers changed: they regroup) or raises it again; after none, it
        joins the job's current generation (commits, or regroups after a change it heard of).
        Every worker of the generation calls it at once; then it pulls every key and goes on
        from start_step()."""
        self._store.recover()

    @property
    def workers_changed(self):
        """Whether the scheduler said the job's workers changed (the next call raises)."""
        return self._store.workers_changed

    @property
    def failed(self):
        """Whether a call of the store failed since the last recover() (what recover() would
        recover from, or raise again)."""
        return self._store.failed

    def worker_hosts(self):
        """(rank, hosts): the host each worker of the job's current generation registered
        from, by rank, and this worker's rank there."""
        return self._store.worker_hosts()

    def start_step(self):
        """The step the pulled values are at (a resumed job's checkpoint; else 0)."""
        return self._store.start_step()


def _say_why_the_program_ends():
    """An exception that reaches the top ends the program with status 1: its last line (and
    where it was raised) goes with the job's verdict, which names this worker."""
    previous = sys.excepthook
    if getattr(previous, "cohort_says_why", False):
        return

    def hook(kind, value, tb):
        where = traceback.extract_tb(tb)[-1] if tb is not None else None
        line = traceback.format_exception_only(kind, value)[-1].strip()
        if where is not None:
            line += f" ({os.path.basename(where.filename)}, line {where.lineno})"
        _cohort.set_exit_reason(line)
        previous(kind, value, tb)

    hook.cohort_says_why = True
    sys.excepthook = hook


def create(type="dist_sync"):
    """A kvstore: "local" (this process), or "dist_sync"/"dist_async", which join the job the
    launcher describes in COHORT_* variables (launch -n W -s S -- python3 script.py). A
    distributed store's worker finishes when the process exits with status 0; any other status
    (an exception that reached the top, sys.exit(n)) fails the job, naming the worker and the
    exception's last line."""
    store = _cohort.create(type)
    if type != "local":
        _say_why_the_program_ends()
    return KVStore(store)


__all__ = ["Error", "Handle", "KVStore", "create"]
