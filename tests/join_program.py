#!/usr/bin/python3
"""Each rank of a job runs a different number of steps (rank r: 2·(n - r)) and then
hvd.join(): the ranks that joined take part in the others' steps with zero gradients, so every
rank ends with the parameters of one process stepping on Σ (the gradients of the ranks still
training) / n, the same bits on every rank; join() returns rank 0 (it joined last). Then every
rank steps once more (the joined flag is reset) and joins at once: nothing moves. Any mismatch
raises, which fails the job naming the rank.

    cohortrun -np 3 -s 1 python tests/join_program.py [--server_optimizer]
"""

import hashlib
import sys

import torch

import cohort.torch as hvd


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(5, 4, generator=g)


def loss_of(model, x):
    return (model(x) - 1).pow(2).mean()


def main():
    server = "--server_optimizer" in sys.argv[1:]
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    torch.manual_seed(3)
    model = torch.nn.Linear(4, 2)
    reference = torch.nn.Linear(4, 2)
    reference.load_state_dict(model.state_dict())
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                         named_parameters=model.named_parameters(),
                                         server_optimizer=server)
    alone = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    steps = [2 * (n - k) for k in range(n)]

    def reference_step(training):
        """One step of the reference on the mean over n ranks, zeros for those not training."""
        alone.zero_grad()
        for k in training:
            (loss_of(reference, batch(k, s)) / n).backward()
        alone.step()

    for s in range(steps[r]):
        optimizer.zero_grad()
        loss_of(model, batch(r, s)).backward()
        optimizer.step()
    last = hvd.join()
    assert last == 0, f"join() said rank {last} joined last"
    for s in range(steps[0]):
        reference_step([k for k in range(n) if s < steps[k]])
    check(model, reference, "after the uneven steps")

    # Joined ranks train again; all joining at once moves nothing.
    s = steps[0]
    optimizer.zero_grad()
    loss_of(model, batch(r, s)).backward()
    optimizer.step()
    reference_step(range(n))
    before = [p.detach().clone() for p in model.parameters()]
    assert hvd.join() == n - 1, "ranks joining together: the highest is said to be last"
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), \
        "joining together changed the parameters"
    check(model, reference, "after every rank joined at once")
    print(f"join ok on rank {r} of {n} ({'server optimizer' if server else 'averaging'})",
          flush=True)


def check(model, reference, when):
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), (when, name, (p - q).abs().max())
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()
    assert len(set(hvd.allgather_object(digest))) == 1, f"{when}: the ranks' parameters differ"


if __name__ == "__main__":
    main()
