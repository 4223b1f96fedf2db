#!/usr/bin/python3
"""The PyTorch example (examples/torch_mnist.py) under torch.distributed instead of Cohort:
DistributedDataParallel over gloo, W processes on this machine, the same model, data slices,
optimizer and flags; the comparison in docs/benchmarks.md (tools/bench/torch_vs_ddp.sh).

    PYTHONPATH=bazel-bin/python python3 tools/bench/torch_ddp_mnist.py -W 2 -- --epochs 1 --batch_size 32
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples"))
import torch_mnist  # noqa: E402


def run(rank, workers, rendezvous, argv):
    args = torch_mnist.arguments(argv)
    # As the launcher gives Cohort's workers: the cores shared out.
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=workers)
    torch.manual_seed(args.seed)
    model = torch.nn.parallel.DistributedDataParallel(torch_mnist.LeNet())
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    torch_mnist.train(model, optimizer, args, rank, workers)
    if rank == 0 and args.save:
        torch_mnist.save(model.module, args.save)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-W", "--workers", type=int, default=2)
    parser.add_argument("example_flags", nargs="*", help="after --: torch_mnist.py's flags")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(run, args=(args.workers, os.path.join(folder, "rendezvous"),
                            args.example_flags), nprocs=args.workers)


if __name__ == "__main__":
    main()
