#!/usr/bin/env python3
"""PyTorch reference for //trainer/gpu:gpu_bench: training throughput of the same models on
synthetic data, printed as one line such as

    torch resnet50 bs=128 bf16 eager: 2850.1 images/sec (44.9 ms/step, 50 steps)

resnet50: torchvision's ImageNet ResNet-50 (no weights, 1000 classes, 224x224 inputs).
resnet56 and resnet20: the CIFAR ResNets of He et al. 2016 (3 stages of 9 or 3 basic blocks,
16/32/64 channels, option-A shortcuts, 10 classes, 32x32 inputs).
googlenet: torchvision's GoogLeNet without the auxiliary classifiers (1000 classes, 224x224).

--device cpu runs on the host's cores in fp32 (the peer of //trainer:bench, whose figures it
prints in the same form).

Each step is a full training step: forward, cross-entropy, backward, SGD (momentum 0.9).
Needs no network: the weights are initialised randomly.
"""

import argparse
import contextlib
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["resnet50", "resnet56", "resnet20", "googlenet"], default="resnet50")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"], default="bf16")
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation, autotuning)")
    p.add_argument("--no_channels_last", action="store_true", help="keep NCHW activations")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1:
        p.error("--steps and --batch_size must be positive, --warmup not negative")
    if args.device == "cpu" and (args.precision != "fp32" or args.mode != "eager"):
        p.error("--device cpu measures fp32 eager: give --precision fp32 --mode eager")
    return args


def build_cifar_resnet(torch, num_classes=10, blocks_per_stage=9):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            # Option A: subsample by 2 and zero-pad the new channels; no parameters.
            self.pad = cout - cin if (stride != 1 or cin != cout) else 0
            self.stride = stride

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.pad or self.stride != 1:
                x = x[:, :, :: self.stride, :: self.stride]
                x = F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
            return F.relu(out + x)

    class ResNetCifar(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn = nn.BatchNorm2d(16)
            layers, cin = [], 16
            for cout, stride in ((16, 1), (32, 2), (64, 2)):
                for i in range(blocks_per_stage):
                    layers.append(Block(cin, cout, stride if i == 0 else 1))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(64, num_classes)
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.init.kaiming_normal_(m.weight)

        def forward(self, x):
            x = F.relu(self.bn(self.conv(x)))
            x = self.layers(x)
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

    return ResNetCifar()


def main(argv=None):
    args = parse_args(argv)
    # Imported after parsing so that --help works where torch is absent.
    import torch

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("torch_resnet_bench: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device(args.device)
    if not cuda:
        # Debian's build starts with one thread; use every core this process may run on, as
        # //trainer:bench does.
        torch.set_num_threads(len(os.sched_getaffinity(0)))
    if cuda:
        torch.backends.cudnn.benchmark = True
        # fp32 means true fp32; tf32 lets matmuls and convolutions use the tensor cores' tf32 mode.
        tf32 = args.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32 or args.precision in ("bf16", "fp16")

    if args.model in ("resnet50", "googlenet"):
        import torchvision

        if args.model == "resnet50":
            model = torchvision.models.resnet50(weights=None, num_classes=1000)
        else:
            model = torchvision.models.googlenet(weights=None, num_classes=1000, aux_logits=False,
                                                 init_weights=True)
        shape, classes = (3, 224, 224), 1000
    else:
        model = build_cifar_resnet(torch, blocks_per_stage=9 if args.model == "resnet56" else 3)
        shape, classes = (3, 32, 32), 10
    fmt = torch.contiguous_format if args.no_channels_last else torch.channels_last
    model = model.to(dev, memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    scaler = torch.cuda.amp.GradScaler(enabled=args.precision == "fp16")
    fwd = torch.compile(model) if args.mode == "compile" else model

    # A few synthetic batches in rotation, already on the device: this measures the training step only.
    gen = torch.Generator(device=dev).manual_seed(0)
    batches = [
        (
            torch.randn(args.batch_size, *shape, device=dev, generator=gen).contiguous(memory_format=fmt),
            torch.randint(0, classes, (args.batch_size,), device=dev, generator=gen),
        )
        for _ in range(4)
    ]

    # CPU autocast takes only bf16 even when disabled: the CPU runs fp32 without it.
    autocast = (lambda: torch.autocast("cuda", dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None)) \
        if cuda else contextlib.nullcontext

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    def sync():
        if cuda:
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    for i in range(args.warmup):
        loss = step(i)
    sync()
    warm_s = time.perf_counter() - t0
    if args.warmup and not torch.isfinite(loss).item():
        print(f"torch_resnet_bench: non-finite loss after warm-up: {loss.item()}", file=sys.stderr)
        return 1

    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(i)
    sync()
    ms = (time.perf_counter() - t0) * 1e3
    ips = args.batch_size * args.steps / (ms / 1e3)
    if cuda:
        where = (f"cudnn {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}; "
                 f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
                 f"{torch.cuda.max_memory_reserved() / 2**30:.2f} GiB reserved")
    else:
        where = f"{torch.get_num_threads()} threads, {'NCHW' if args.no_channels_last else 'channels_last'}"
    print(f"# torch {torch.__version__}, {where}; warm-up {args.warmup} steps {warm_s:.1f} s; "
          f"final loss {loss.item():.4f}")
    print(
        f"torch {args.model} bs={args.batch_size} {args.precision} {args.mode}: {ips:.1f} images/sec "
        f"({ms / args.steps:.2f} ms/step, {args.steps} steps)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
