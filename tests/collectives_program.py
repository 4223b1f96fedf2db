#!/usr/bin/python3
"""Each rank of a job checks Horovod's collectives of cohort.torch against what every rank
brought (rank r brings values made from r), and SyncBatchNorm against BatchNorm on the whole
batch, and prints one line of what it got; any mismatch raises, which fails the job naming the
rank.

    launch -n 3 -s 1 -- python3 tests/collectives_program.py
"""

import hashlib

import torch

import cohort
import cohort.torch as hvd


def mine(r):
    return torch.tensor([1.5 * r - 1, 2.0 ** -r, 3.0 + r])


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    assert hvd.is_initialized()
    assert (hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size()) == \
        (r, n, 0, 1), "one host: local rank = rank"

    every = [mine(k) for k in range(n)]
    summed = every[0].clone()
    for t in every[1:]:
        summed += t
    assert torch.equal(hvd.allreduce(mine(r), op=hvd.Sum), summed)
    assert torch.equal(hvd.allreduce(mine(r)), summed / n)
    assert torch.equal(hvd.allreduce(mine(r), average=False), summed)
    assert torch.equal(hvd.allreduce(mine(r), op=hvd.Min), torch.stack(every).min(0).values)
    assert torch.equal(hvd.allreduce(mine(r), op=hvd.Max), torch.stack(every).max(0).values)
    grouped = hvd.grouped_allreduce([mine(r), 2 * mine(r)], op=hvd.Sum)
    assert torch.equal(grouped[0], summed) and torch.equal(grouped[1], 2 * summed)
    inplace = mine(r)
    hvd.synchronize(hvd.allreduce_async_(inplace, name="in place"))
    assert torch.equal(inplace, summed / n)
    assert torch.equal(hvd.allreduce(torch.tensor([r], dtype=torch.int64), op=hvd.Sum),
                       torch.tensor([n * (n - 1) // 2]))
    try:
        hvd.allreduce(mine(r), op=hvd.Adasum)
        raise AssertionError("Adasum was not refused")
    except cohort.Error as e:
        assert "use op=hvd.Average" in str(e), e
    # In 16 bits on the wire: each rank's values rounded, the sum in the tensor's own dtype.
    for compression, wire in ((hvd.Compression.fp16, torch.float16),
                              (hvd.Compression.bf16, torch.bfloat16)):
        thirds = [torch.tensor([0.1 * (k + 1), 1 / 3]) for k in range(n)]
        got = hvd.allreduce(thirds[r], op=hvd.Sum, compression=compression)
        want = thirds[0].to(wire).float()
        for t in thirds[1:]:
            want += t.to(wire).float()
        assert got.dtype == torch.float32 and torch.equal(got, want), (compression, got, want)
        assert not torch.equal(got, sum(thirds)), "nothing was rounded"
    # Ranks whose calls differ are told so, each of them.
    try:
        hvd.allreduce(mine(r), name=f"metric of rank {r}")
        raise AssertionError("different names were not refused")
    except cohort.Error as e:
        assert "rank 0 'metric of rank 0', rank 1 'metric of rank 1'" in str(e), e

    # The first dimension may differ between ranks.
    gathered = hvd.allgather(torch.full((r + 1, 2), float(r)))
    assert torch.equal(gathered, torch.cat([torch.full((k + 1, 2), float(k)) for k in range(n)]))
    assert hvd.allgather_object({"rank": r}) == [{"rank": k} for k in range(n)]

    last = n - 1
    assert torch.equal(hvd.broadcast(mine(r), root_rank=last), mine(last))
    assert hvd.broadcast_object(f"from {r}", root_rank=last) == f"from {last}"
    params = {"w": torch.full((3, 4), float(r)), "step": torch.tensor(r),
              "half": torch.full((2,), float(r), dtype=torch.bfloat16)}
    hvd.broadcast_parameters(params, root_rank=last)
    assert torch.equal(params["w"], torch.full((3, 4), float(last)))
    assert params["step"].item() == last and params["half"][0].item() == last

    model = torch.nn.Linear(4, 2)
    with torch.no_grad():
        model.weight.fill_(r)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.9)
    model(torch.ones(1, 4)).sum().backward()
    optimizer.step()  # momentum buffers that differ by rank
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]["lr"] == 0.1
    state = optimizer.state_dict()["state"]
    hvd.barrier()
    digest = hashlib.sha256(pickle_state(state)).hexdigest()
    assert len(set(hvd.allgather_object(digest))) == 1, "optimizer states differ"
    # An optimizer asking for compression the job does not send is refused, saying how.
    try:
        hvd.DistributedOptimizer(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1),
                                 compression=hvd.Compression.fp16)
        raise AssertionError("compression=fp16 accepted in a job that sends float32")
    except cohort.Error as e:
        assert "this job sends none: start it with cohortrun --gradient_compression=fp16" in \
            str(e), e
    # bf16 parameters: exchanged as float32 through the host, the means written back.
    torch.manual_seed(0)
    half = torch.nn.Linear(4, 2).to(torch.bfloat16)
    distributed = hvd.DistributedOptimizer(torch.optim.SGD(half.parameters(), lr=0.5),
                                           named_parameters=half.named_parameters())
    half(torch.full((1, 4), float(r + 1), dtype=torch.bfloat16)).sum().backward()
    distributed.step()
    assert half.weight.dtype == torch.bfloat16
    # Rank k's weight gradient is k + 1 in every element: the mean is (n + 1) / 2.
    assert torch.equal(half.weight.grad, torch.full((2, 4), (n + 1) / 2, dtype=torch.bfloat16))
    digest = hashlib.sha256(half.weight.detach().float().numpy().tobytes()).hexdigest()
    assert len(set(hvd.allgather_object(digest))) == 1, "bf16 parameters differ"
    check_sync_batch_norm(r, n)
    print(f"collectives ok on rank {r} of {n}: sum {summed.tolist()}", flush=True)


def check_sync_batch_norm(r, n):
    """Rank k holds k + 3 samples of one global batch: its SyncBatchNorm's output, input
    gradient and running statistics are torch's BatchNorm2d's on the whole batch (float64), the
    affine gradients summed over the ranks too, and every rank's running statistics the same
    bits."""
    sizes = [k + 3 for k in range(n)]
    start, end = sum(sizes[:r]), sum(sizes[:r + 1])
    torch.manual_seed(7)
    x = torch.randn(sum(sizes), 4, 3, 3, dtype=torch.float64) * 2 + 1
    weigh = torch.randn_like(x)  # the loss: sum(y * weigh), not symmetric in the samples
    affine = torch.randn(2, 4, dtype=torch.float64)
    whole = torch.nn.BatchNorm2d(4, momentum=0.3).double()
    synced = hvd.SyncBatchNorm(4, momentum=0.3).double()
    for layer in (whole, synced):
        with torch.no_grad():
            layer.weight.copy_(affine[0])
            layer.bias.copy_(affine[1])
    reference_in = x.clone().requires_grad_()
    reference = whole(reference_in)
    (reference * weigh).sum().backward()
    part = x[start:end].clone().requires_grad_()
    y = synced(part)
    (y * weigh[start:end]).sum().backward()

    def close(a, b, what):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12), (what, (a - b).abs().max())
    close(y, reference[start:end], "output")
    close(part.grad, reference_in.grad[start:end], "input gradient")
    close(hvd.allreduce(synced.weight.grad, op=hvd.Sum), whole.weight.grad, "weight gradient")
    close(hvd.allreduce(synced.bias.grad, op=hvd.Sum), whole.bias.grad, "bias gradient")
    close(synced.running_mean, whole.running_mean, "running mean")
    close(synced.running_var, whole.running_var, "running variance")
    stats = torch.cat([synced.running_mean, synced.running_var]).numpy().tobytes()
    assert len(set(hvd.allgather_object(stats))) == 1, "running statistics differ by rank"
    synced.eval()
    whole.eval()
    close(synced(part.detach()), whole(x)[start:end], "evaluation")


def pickle_state(state):
    return b"".join(v.numpy().tobytes() for s in state.values() for v in s.values()
                    if torch.is_tensor(v))


if __name__ == "__main__":
    main()
