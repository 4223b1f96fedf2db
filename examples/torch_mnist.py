#!/usr/bin/python3
"""torch_mnist: a PyTorch training script on Cohort, changed in three lines from one that
trains alone (cohort.torch.init, DistributedOptimizer, broadcast_parameters). LeNet-5 on
Fashion-MNIST, read from the IDX files with numpy.

    bazel build //python:cohort
    PYTHONPATH=$PWD/bazel-bin/python bazel run //tools:launch -- -n 2 -s 2 -- \\
        python3 $PWD/examples/torch_mnist.py --epochs 1

--batch_size is per worker: step s of an epoch trains on the global batch of samples
[s·W·b, (s+1)·W·b) of the epoch's shuffled order, rank r on its r-th slice of b, so W workers
compute what one process computes on the W·b samples (--kv_store none: plain PyTorch, alone).
--device cuda trains on a GPU (each worker on its host's GPU local_rank, modulo the GPUs there).
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import cohort
import cohort.torch as ct

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training pixels, over 255


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, split):
    def find(name):
        for candidate in (name + ".gz", name):
            path = os.path.join(data_dir, candidate)
            if os.path.exists(path):
                return path
        raise FileNotFoundError(f"no {name}(.gz) in {data_dir}")
    images = read_idx(find(f"{split}-images-idx3-ubyte"))
    labels = read_idx(find(f"{split}-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.astype(np.float32)) / 255 - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


class LeNet(nn.Module):
    """LeNet-5 as Cohort's own (61,706 parameters)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def train(model, optimizer, args, rank, workers, device="cpu"):
    """The training loop: rank's slice of every global batch; rank 0 prints each epoch's time
    and test accuracy (as "Epoch E: S s, N steps, test top-1 P%")."""
    train_x, train_y = (t.to(device) for t in load(args.data_dir, "train"))
    test_x, test_y = (t.to(device) for t in load(args.data_dir, "t10k"))
    scheduler = (torch.optim.lr_scheduler.StepLR(optimizer, args.lr_step, gamma=0.5)
                 if args.lr_step else None)
    global_batch = args.batch_size * workers
    steps_per_epoch = len(train_x) // global_batch
    step = 0
    print(f"torch_mnist: rank {rank} of {workers}, batch {args.batch_size} x {workers}, "
          f"{steps_per_epoch} steps per epoch", flush=True)
    for epoch in range(args.epochs):
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        start = time.monotonic()
        for s in range(steps_per_epoch):
            if args.steps and step == args.steps:
                break
            first = s * global_batch + rank * args.batch_size
            rows = order[first:first + args.batch_size].to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(train_x[rows]), train_y[rows])
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            step += 1
            if rank == 0 and step % 100 == 0:
                print(f"step {step}: loss {loss.item():.4f}", flush=True)
        seconds = time.monotonic() - start
        if rank == 0:
            with torch.no_grad():
                top1 = (model(test_x).argmax(1) == test_y).float().mean().item() * 100
            print(f"Epoch {epoch}: {seconds:.1f} s, {step} steps, test top-1 {top1:.2f}%",
                  flush=True)


def arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many (0: all)")
    parser.add_argument("--batch_size", type=int, default=64, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--lr_step", type=int, default=0,
                        help="halve the learning rate every this many steps (torch's StepLR; "
                        "0: never)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kv_store", default="dist_sync",
                        help="dist_sync, dist_async, local, or none (plain PyTorch, alone)")
    parser.add_argument("--server_optimizer", action="store_true",
                        help="the shards run SGD (else they average gradients)")
    parser.add_argument("--save", default="", help="rank 0 writes the parameters here (.npz)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    return parser.parse_args(argv)


def main():
    args = arguments()

    torch.manual_seed(args.seed)
    rank, workers = 0, 1
    if args.kv_store != "none":
        ct.init(kv_store=args.kv_store)
        rank, workers = ct.rank(), ct.size()
    device = torch.device(args.device)
    if args.device == "cuda" and args.kv_store != "none":
        device = torch.device("cuda", ct.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    model = LeNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if args.kv_store != "none":
        optimizer = ct.DistributedOptimizer(optimizer, model.named_parameters(),
                                            server_optimizer=args.server_optimizer,
                                            batch_size=args.batch_size)
        ct.broadcast_parameters(model.state_dict())

    train(model, optimizer, args, rank, workers, device)
    if rank == 0 and args.save:
        save(model, args.save)
    return 0


def save(model, path):
    """The model's parameters as a .npz, by name."""
    np.savez(path, **{n: t.detach().cpu().numpy() for n, t in model.state_dict().items()})


if __name__ == "__main__":
    try:
        sys.exit(main())
    except cohort.Error as e:
        print(f"torch_mnist: error: {e}", file=sys.stderr)
        sys.exit(1)
