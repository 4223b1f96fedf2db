#!/usr/bin/python3
"""A PyTorch training script written for Horovod (LeNet-5 on Fashion-MNIST), run on Cohort
with its import line changed: `import cohort.torch as hvd` for `import horovod.torch as hvd`.
It uses what Horovod users do: local_rank for the device, a DistributedSampler over
hvd.size() ranks, broadcast_parameters and broadcast_optimizer_state from rank 0, a
DistributedOptimizer with compression and two backward passes a step (the batch in halves),
a StepLR schedule, and the test accuracy and loss averaged over the ranks with allreduce.

    cohortrun -np 2 python3 tests/horovod_mnist.py --epochs 2

--batch_size is per rank; the last line gives the averaged accuracy, and --save writes rank 0's
parameters (.npz) with a fingerprint of every rank's.
"""

import argparse
import gzip
import hashlib
import os

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.data
from torch import nn
from torch.utils.data.distributed import DistributedSampler

import cohort.torch as hvd

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def dataset(data_dir, split, limit):
    def find(name):
        for candidate in (name + ".gz", name):
            if os.path.exists(os.path.join(data_dir, candidate)):
                return os.path.join(data_dir, candidate)
        raise FileNotFoundError(f"no {name}(.gz) in {data_dir}")
    images = read_idx(find(f"{split}-images-idx3-ubyte"))[:limit]
    labels = read_idx(find(f"{split}-labels-idx1-ubyte"))[:limit]
    x = (torch.from_numpy(images.astype(np.float32)) / 255 - MEAN) / STD
    return torch.utils.data.TensorDataset(x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64)))


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


def evaluate(model, loader):
    model.eval()
    correct, loss, seen = 0.0, 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
    # Each rank holds its share of the test set: the metrics averaged over the ranks.
    accuracy = hvd.allreduce(torch.tensor(correct / seen), name="avg_accuracy")
    loss = hvd.allreduce(torch.tensor(loss / seen), name="avg_loss")
    return accuracy.item() * 100, loss.item()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=64, help="per rank")
    p.add_argument("--train_samples", type=int, default=60000)
    p.add_argument("--lr", type=float, default=0.02, help="per rank; scaled by hvd.size()")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--save", default="")
    args = p.parse_args()

    hvd.init()
    torch.manual_seed(args.seed)
    if torch.cuda.is_available():
        torch.cuda.set_device(hvd.local_rank())
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))

    train_set = dataset(args.data_dir, "train", args.train_samples)
    test_set = dataset(args.data_dir, "t10k", 10000)
    train_sampler = DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(),
                                       seed=args.seed)
    test_sampler = DistributedSampler(test_set, num_replicas=hvd.size(), rank=hvd.rank(),
                                      shuffle=False)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler, drop_last=True)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=1000, sampler=test_sampler)

    model = LeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=hvd.Compression.none,
                                         backward_passes_per_step=2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    for epoch in range(args.epochs):
        model.train()
        train_sampler.set_epoch(epoch)
        for x, y in train_loader:
            optimizer.zero_grad()
            for half_x, half_y in zip(x.chunk(2), y.chunk(2)):
                loss = F.cross_entropy(model(half_x), half_y) / 2
                loss.backward()
            optimizer.step()
        scheduler.step()
        accuracy, loss = evaluate(model, test_loader)
        if hvd.rank() == 0:
            print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.4f}, test accuracy "
                  f"{accuracy:.2f}%, loss {loss:.4f}", flush=True)

    digest = hashlib.sha256(b"".join(t.detach().numpy().tobytes()
                                     for t in model.state_dict().values())).hexdigest()
    digests = hvd.allgather_object(digest)
    if hvd.rank() == 0:
        print(f"parameters of every rank: {' '.join(d[:16] for d in digests)}", flush=True)
        if args.save:
            np.savez(args.save, **{n: t.detach().numpy() for n, t in model.state_dict().items()})
        print(f"final test accuracy {accuracy:.2f}%", flush=True)


if __name__ == "__main__":
    main()
