#!/usr/bin/env python3
"""ResNet-50 (torchvision) on synthetic images, one worker on one GPU, trained two ways on the
same machine: on Cohort (`cohortrun -np 1 -s 2 python3 torch_ddp_resnet.py --mode cohort`: the
gradients of CUDA tensors go through pinned host memory to the shards and the means come back)
and under torch.distributed DDP over nccl (`--mode ddp`, one process). Prints
"torch_ddp_resnet: MODE bs B PRECISION: X images/sec (median of N steps after W ...)".
--device cpu (DDP over gloo) tries the script where there is no GPU.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["cohort", "ddp"], required=True)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--port", type=int, default=29511, help="DDP's rendezvous on 127.0.0.1")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    return parser.parse_args()


def main():
    args = arguments()
    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    rank = 0
    if args.mode == "cohort":
        import cohort.torch as hvd
        hvd.init()
        rank = hvd.rank()
        device = torch.device("cpu")
        if args.device == "cuda":
            device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
            torch.cuda.set_device(device)
        model = model.to(device, memory_format=torch.channels_last)
        optimizer = hvd.DistributedOptimizer(optimizer, model.named_parameters(),
                                             batch_size=args.batch_size)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    else:
        cuda = args.device == "cuda"
        torch.distributed.init_process_group("nccl" if cuda else "gloo",
                                             init_method=f"tcp://127.0.0.1:{args.port}", rank=0,
                                             world_size=1)
        device = torch.device("cuda", 0) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
        model = model.to(device, memory_format=torch.channels_last)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0] if cuda else None)
    x = torch.randn(args.batch_size, 3, 224, 224, device=device).to(
        memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch_size,), device=device)
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, torch.bfloat16, enabled=args.precision == "bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    if rank == 0:
        print(f"torch_ddp_resnet: {args.mode} bs {args.batch_size} {args.precision}: "
              f"{args.batch_size / statistics.median(times):.1f} images/sec (median of {args.steps} "
              f"steps after {args.warmup}; loss {loss.item():.3f})", flush=True)
    if args.mode == "ddp":
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
