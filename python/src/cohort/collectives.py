"""Horovod's collectives of small tensors and objects, on the job's scheduler: every call is an
exchange (a barrier at which each worker brings bytes and gets every worker's back, by rank),
and each rank reduces what it got in rank order, so every rank holds the same bits.

For what a step needs (a metric, a flag, rank 0's optimizer state or epoch), not for
gradients, which go through the shards (cohort.torch.DistributedOptimizer): the workers
together bring at most 12 MiB to one call (broadcast_tensors sends a model in slices). Every
rank makes the same calls in the same order (Horovod matches them by name; here the order
does, and an allreduce whose ranks gave different names fails naming them).
"""

import pickle

import torch

from cohort._cohort import Error

Average, Sum, Min, Max, Product, Adasum = "average", "sum", "min", "max", "product", "adasum"


class Handle:
    """An asynchronous call's result: Cohort's calls finish before they return."""

    def __init__(self, result):
        self.result = result


def gather_objects(store, obj):
    """Every rank's obj, by rank."""
    return [pickle.loads(b) for b in store.exchange(pickle.dumps(obj))]


def broadcast_object(store, obj, root_rank):
    """root_rank's obj on every rank (the other ranks bring nothing)."""
    check_root(store, root_rank)
    mine = pickle.dumps(obj) if store.rank == root_rank else b""
    return pickle.loads(store.exchange(mine)[root_rank])


def check_root(store, root_rank):
    if not 0 <= root_rank < store.num_workers:
        raise Error(f"root_rank={root_rank}: the job's ranks are 0..{store.num_workers - 1}")


def _op(average, op):
    if average is not None and op is not None:
        raise Error("allreduce: give average= or op=, not both")
    if op is None:
        op = Sum if average is False else Average
    if op == Adasum:
        raise Error("op=Adasum: Cohort reduces on parameter servers and has no Adasum; use "
                    "op=hvd.Average (the default) or op=hvd.Sum")
    if op not in (Average, Sum, Min, Max, Product):
        raise Error(f"allreduce: op={op!r} is none of Average, Sum, Min, Max, Product")
    return op


def check_no_process_set(process_set):
    if process_set is not None:
        raise Error("process_set: a Cohort job has one set of workers, all of them")


def _cpu(tensor):
    if not torch.is_tensor(tensor):
        raise Error(f"expected a torch tensor, got {type(tensor).__name__}")
    return tensor.detach().to("cpu")


_WIRE_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def allreduce(store, tensors, average=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None, compression=None, name=None):
    """The reduction over every rank of each of tensors (each rank's of the same shapes and
    dtypes), in one exchange, as new tensors on their devices. compression "fp16" or "bf16"
    sends floating tensors in 16 bits (rounded), which are reduced in their own dtype."""
    op = _op(average, op)
    check_no_process_set(process_set)
    if compression not in (None, "none", *_WIRE_DTYPES):
        raise Error(f"allreduce: compression={compression!r}: Cohort has "
                    "hvd.Compression.none, fp16 and bf16")
    wire = _WIRE_DTYPES.get(compression)
    mine = [_cpu(t) for t in tensors]
    if prescale_factor != 1.0:
        mine = [t * prescale_factor for t in mine]
    if wire is not None:
        mine = [t.to(wire) if t.is_floating_point() else t for t in mine]
    every = gather_objects(store, (name, mine))
    names = [theirs[0] for theirs in every]
    if any(n != name for n in names):
        raise Error("allreduce: the ranks gave different names (" +
                    ", ".join(f"rank {r} {n!r}" for r, n in enumerate(names)) +
                    "): every rank makes the same calls in the same order")
    results = []
    for i, t in enumerate(tensors):
        by_rank = [theirs[1][i] for theirs in every]
        if wire is not None and t.is_floating_point():
            by_rank = [theirs.to(t.dtype) for theirs in by_rank]
        result = _reduce(op, by_rank, store.rank)
        if postscale_factor != 1.0:
            result = result * postscale_factor
        results.append(result.to(t.device))
    return results


def _reduce(op, by_rank, rank):
    """op over by_rank (one tensor of each rank) in rank order: the same bits on every rank."""
    mine = by_rank[rank]
    for r, other in enumerate(by_rank):
        if other.shape != mine.shape or other.dtype != mine.dtype:
            raise Error(f"allreduce: rank {r} brought {other.dtype} {tuple(other.shape)}, "
                        f"rank {rank} {mine.dtype} {tuple(mine.shape)}: every rank reduces a "
                        "tensor of the same shape and dtype")
    result = by_rank[0].clone()
    for other in by_rank[1:]:
        if op in (Average, Sum):
            result += other
        elif op == Min:
            result = torch.minimum(result, other)
        elif op == Max:
            result = torch.maximum(result, other)
        else:
            result *= other
    if op == Average:
        result = (result / len(by_rank) if result.is_floating_point()
                  else torch.div(result, len(by_rank), rounding_mode="floor"))
    return result


def allgather(store, tensor, process_set=None):
    """Every rank's tensor concatenated along the first dimension, by rank (the first
    dimension may differ between ranks, the others not)."""
    check_no_process_set(process_set)
    every = gather_objects(store, _cpu(tensor))
    for rank, other in enumerate(every):
        if other.shape[1:] != every[0].shape[1:] or other.dtype != every[0].dtype:
            raise Error(f"allgather: rank {rank} brought {other.dtype} {tuple(other.shape)}, "
                        f"rank 0 {every[0].dtype} {tuple(every[0].shape)}: only the first "
                        "dimension may differ")
    return torch.cat(every).to(tensor.device)


def broadcast(store, tensor, root_rank, process_set=None):
    """root_rank's tensor, as a new tensor on tensor's device."""
    check_no_process_set(process_set)
    return broadcast_object(store, _cpu(tensor), root_rank).to(tensor.device)


SLICE_BYTES = 8 << 20  # of a broadcast_tensors call (one root's bytes to an exchange)


def _bytes_of(tensor):
    return tensor.detach().to("cpu").contiguous().view(-1).view(torch.uint8)


def broadcast_tensors(store, named, root_rank):
    """Sets every tensor of named ((name, tensor) pairs, the same names, shapes and dtypes on
    every rank) to root_rank's, in slices of SLICE_BYTES: a model of any size, once."""
    check_root(store, root_rank)
    layout = [(n, str(t.dtype), tuple(t.shape)) for n, t in named]
    theirs = broadcast_object(store, layout, root_rank)
    if theirs != layout:
        i = next(i for i, (a, b) in enumerate(zip(theirs + [None], layout + [None])) if a != b)
        said = [x[i] if i < len(x) else "nothing more" for x in (theirs, layout)]
        raise Error(f"broadcast_parameters: rank {root_rank} has {said[0]} where rank "
                    f"{store.rank} has {said[1]}: every rank builds the same model")
    mine = (torch.cat([_bytes_of(t) for _, t in named]) if store.rank == root_rank and named
            else None)
    sizes = [t.numel() * t.element_size() for _, t in named]
    total = sum(sizes)
    received = bytearray()
    for start in range(0, total, SLICE_BYTES):
        piece = mine[start:start + SLICE_BYTES].numpy().tobytes() if mine is not None else b""
        received += store.exchange(piece)[root_rank]
    if store.rank == root_rank or total == 0:
        return
    flat = torch.frombuffer(received, dtype=torch.uint8)
    offset = 0
    with torch.no_grad():
        for (_, t), n in zip(named, sizes):
            t.copy_(flat[offset:offset + n].clone().view(t.dtype).view(t.shape))  # aligned
            offset += n
