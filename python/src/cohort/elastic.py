"""Horovod's elastic training (hvd.elastic) on Cohort's elastic jobs: the workers may die and
new ones join while the job goes on.

    cohortrun -np 3 --min-np 2 --checkpoint_dir=ckpt --checkpoint_every=20 \\
        --restart_failed_workers python train.py

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader, start=state.batch):
                ...; optimizer.step(); sampler.record_batch(state.batch, batch_size)
                if state.batch % 10 == 0:
                    state.commit()
            state.batch = 0

    train(state)

How it maps onto the job: the scheduler starts a new generation of workers when one dies or
joins (docs/reliability.md, "Elastic workers"); every worker's next exchange is interrupted.
`run` then has the workers of the new generation regroup on the shards (the kvstore's
recover(): the shards' steps renumbered for the new number of workers), goes back to the last
commit() (the state's copy in memory), calls the reset callbacks, hands rank 0's state to
every worker (a joining one starts there) and calls the function again. A failure that is no
change of workers (a wrong argument, a job failing below --min-np) is raised as it came.

The state's model is the workers' own, so gradients are averaged (server_optimizer=False):
with the shards' optimizer the parameters go back to the shards' newest checkpoint, which
a commit in the workers' memory cannot follow. Make every DistributedOptimizer before the
function is first called.
"""

import copy
import functools
import math

import torch

from cohort import torch as hvd
from cohort._cohort import Error

# What Horovod raises when a peer fails: here every failed call raises cohort.Error.
HorovodInternalError = Error


class HostsUpdatedInterrupt(RuntimeError):
    """The job's workers changed (raised by commit() or check_host_updates()): run() regroups
    without going back to the last commit, which was just made."""

    def __init__(self, skip_sync=False):
        super().__init__("the job's workers changed")
        self.skip_sync = skip_sync


class State:
    """What a worker keeps to go back to (commit) and hands to new workers (sync)."""

    def __init__(self):
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Called after every regroup, before the state is synchronised (a script re-makes
        what depends on the number of workers here: its learning rate, its loaders)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Keeps the state as it is now, to go back to when the workers change, then checks
        whether they did."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt when the scheduler said the job's workers changed. A
        worker that has not heard it yet finds its next exchange interrupted and goes back to
        the same commit."""
        if hvd.init().workers_changed:
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


class ObjectState(State):
    """State of picklable attributes (epoch=0, batch=0): kept by commit(), rank 0's given to
    every worker by sync()."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        self._bcast_object = bcast_object or hvd.broadcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__()

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state, 0)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))


class _Kept:
    """One object of a TorchState, kept by its state_dict."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class _Model(_Kept):
    def sync(self):
        hvd.broadcast_parameters(self.value.state_dict(), root_rank=0)


class _Optimizer(_Kept):
    def __init__(self, optimizer):
        if getattr(optimizer, "server_optimizer", False):
            raise Error("elastic TorchState with server_optimizer=True: the shards hold those "
                        "parameters and go back to their newest checkpoint when the workers "
                        "change, which the state's commit in memory cannot follow; average the "
                        "gradients (server_optimizer=False)")
        super().__init__(optimizer)

    def sync(self):
        hvd.broadcast_optimizer_state(self.value, root_rank=0)


class _Sampler(_Kept):
    def sync(self):
        """The samples every worker had processed by its commit, rank 0's epoch."""
        state = self.value.state_dict()
        state["processed_indices"] = set().union(
            *hvd.allgather_object(self.value.processed_indices))
        self.value.load_state_dict(hvd.broadcast_object(state, 0))


class TorchState(ObjectState):
    """A model, its optimizer, ElasticSamplers and picklable attributes (epoch=0, batch=0),
    as state: commit() copies the state_dicts, sync() gives every worker rank 0's."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self._kept = {}
        if model is not None:
            self._kept["model"] = _Model(model)
        if optimizer is not None:
            self._kept["optimizer"] = _Optimizer(optimizer)
        for name in [n for n, v in kwargs.items() if isinstance(v, ElasticSampler)]:
            self._kept[name] = _Sampler(kwargs.pop(name))
        for name, kept in self._kept.items():
            setattr(self, name, kept.value)
        super().__init__(**kwargs)

    def save(self):
        for kept in self._kept.values():
            kept.save()
        super().save()

    def restore(self):
        for kept in self._kept.values():
            kept.restore()
        super().restore()

    def sync(self):
        for kept in self._kept.values():
            kept.sync()
        super().sync()


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's sampler for elastic jobs: each epoch's samples not yet processed (record_batch
    says which were), shuffled by (seed, epoch) and split among the workers there are now, so a
    regroup goes on with the rest of the epoch."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """A new epoch: every sample is to be seen again."""
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """The batch_idx-th batch of this worker's part (of batch_size) was processed."""
        start = batch_idx * batch_size
        self.record_indices(self.indices[start:start + batch_size])

    def record_indices(self, indices):
        self.processed_indices.update(indices)

    def state_dict(self):
        return dict(epoch=self.epoch, processed_indices=self.processed_indices)

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        """The remaining samples split for the job's workers now."""
        self.num_replicas = hvd.size()
        self.rank = hvd.rank()
        self.remaining_indices = [i for i in range(len(self.dataset))
                                  if i not in self.processed_indices]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = [indices[i] for i in torch.randperm(len(indices), generator=generator)]
        # Every worker takes as many: the first samples again fill the last stride.
        indices += indices[:self.total_size - len(indices)]
        self.indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self):
        return self.num_samples


def run(func):
    """Horovod's @hvd.elastic.run: func(state, ...) is called again, after the workers
    regrouped, each time the job's workers change under it; what it returns is returned."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        hvd._rejoin()  # the store commits (a joining worker regroups with the others)
        sync = True
        while True:
            try:
                if sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as interrupt:
                hvd._rejoin()
                sync = not interrupt.skip_sync
            except Error as failure:
                _regroup_after(failure)
                state.restore()
                sync = True
            state.on_reset()
    return wrapper


def _regroup_after(failure):
    """The workers regroup after `failure`, or it is raised: a failure that is no change of
    workers (one of the store's it cannot recover from, or an error raised in Python) as it
    came, one while regrouping with both."""
    store = hvd.init()
    if not store.failed and not store.workers_changed:
        raise failure
    try:
        hvd._rejoin()
    except Error as recovering:
        if str(recovering) == str(failure):
            raise failure
        raise recovering from failure


__all__ = ["ElasticSampler", "HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState",
           "State", "TorchState", "run"]
