#!/usr/bin/python3
"""A Horovod elastic PyTorch script (LeNet-5 on Fashion-MNIST), run on Cohort with its import
line changed: hvd.elastic.TorchState over the model, the optimizer and an ElasticSampler, the
training function under @hvd.elastic.run committing every few batches, and a reset callback
that scales the learning rate with the workers there are.

    cohortrun -np 3 --min-np 2 --checkpoint_dir=ckpt --checkpoint_every=5 \\
        python3 tests/elastic_mnist.py --die 2:0:10 --marker /tmp/died

--die RANK:EPOCH:BATCH: that rank kills itself (SIGKILL) there, once (--marker records that it
did, so a worker started in its place goes on). Rank 0 says each regroup, and at the end the
test accuracy and a fingerprint of every rank's parameters.
"""

import argparse
import hashlib
import os
import signal

import torch
import torch.nn.functional as F
import torch.utils.data
from torch.utils.data.distributed import DistributedSampler

import cohort.torch as hvd
from horovod_mnist import LeNet, dataset, evaluate


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=32, help="per rank")
    p.add_argument("--train_samples", type=int, default=6000)
    p.add_argument("--lr", type=float, default=0.01, help="per rank; scaled by hvd.size()")
    p.add_argument("--commit_every", type=int, default=4, help="batches")
    p.add_argument("--die", default="", help="RANK:EPOCH:BATCH")
    p.add_argument("--marker", default="")
    args = p.parse_args()

    hvd.init()
    torch.manual_seed(42)
    torch.set_num_threads(1)
    train_set = dataset(args.data_dir, "train", args.train_samples)
    test_set = dataset(args.data_dir, "t10k", 2000)

    model = LeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(train_set, seed=1)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    die = [int(v) for v in args.die.split(":")] if args.die else None

    def on_reset():
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        if hvd.rank() == 0:
            print(f"regrouped: rank {hvd.rank()} of {hvd.size()}, local rank "
                  f"{hvd.local_rank()} of {hvd.local_size()}", flush=True)

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)
    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            model.train()
            for i, (x, y) in enumerate(loader):
                if (die and [hvd.rank(), state.epoch, state.batch] == die
                        and not os.path.exists(args.marker)):
                    open(args.marker, "w").close()
                    os.kill(os.getpid(), signal.SIGKILL)
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
                sampler.record_batch(i, args.batch_size)
                state.batch += 1
                if state.batch % args.commit_every == 0:
                    state.commit()
            state.epoch += 1
            state.batch = 0
            sampler.set_epoch(state.epoch)
            state.commit()

    train(state)

    test_sampler = DistributedSampler(test_set, num_replicas=hvd.size(), rank=hvd.rank(),
                                      shuffle=False)
    accuracy, _ = evaluate(model, torch.utils.data.DataLoader(test_set, batch_size=500,
                                                              sampler=test_sampler))
    digest = hashlib.sha256(b"".join(t.detach().numpy().tobytes()
                                     for t in model.state_dict().values())).hexdigest()
    digests = hvd.allgather_object(digest)
    if hvd.rank() == 0:
        print(f"parameters of all {hvd.size()} ranks: {' '.join(d[:16] for d in digests)}",
              flush=True)
        print(f"final test accuracy {accuracy:.2f}%", flush=True)


if __name__ == "__main__":
    main()
