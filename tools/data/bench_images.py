"""The torchvision side of tools/data/bench_images.sh, and the images it reads.

  bench_images.py generate --dir DIR [--count 1600] [--classes 10]
      ImageNet-sized JPEGs (500x375, quality 90) in DIR/class_NN/: smooth gradients, shapes and a
      little noise, which JPEG compresses as it does photographs (pure noise it does not).
  bench_images.py torchvision --images DIR --workers N [--batch_size 64] [--seconds 10]
      ImageFolder + DataLoader with RandomResizedCrop(224), RandomHorizontalFlip, ToTensor and
      Normalize on N worker processes; prints one line as image_pipeline_bench does.
"""

import argparse
import os
import shutil
import sys
import time


def generate(args):
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    if os.path.isfile(os.path.join(args.dir, "DONE")):
        return
    # Written beside, then renamed: an interrupted run leaves no half folder that looks done.
    tmp = args.dir.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    rng = np.random.default_rng(0)
    w, h = 500, 375
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    total = 0
    for i in range(args.count):
        c = i % args.classes
        base = rng.uniform(0, 255, 3)
        gx, gy = rng.uniform(-0.4, 0.4, (2, 3))
        pixels = base + xx[..., None] * gx + yy[..., None] * gy
        img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(img)
        for _ in range(rng.integers(6, 16)):
            x0, y0 = rng.uniform(-50, w), rng.uniform(-50, h)
            x1, y1 = x0 + rng.uniform(20, 250), y0 + rng.uniform(20, 200)
            colour = tuple(int(v) for v in rng.integers(0, 256, 3))
            kind = rng.integers(3)
            if kind == 0:
                draw.ellipse((x0, y0, x1, y1), fill=colour)
            elif kind == 1:
                draw.rectangle((x0, y0, x1, y1), fill=colour)
            else:
                draw.polygon([tuple(p) for p in rng.uniform((x0, y0), (x1, y1), (5, 2))],
                             fill=colour)
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 2.0)))
        # Texture: noise blurred to a pixel or two (fine detail, as in a photograph), then a
        # little sensor noise: about 70 KB a file (ImageNet's average is about 110 KB).
        grain = Image.fromarray(np.clip(rng.normal(128, 40, (h, w)), 0, 255).astype(np.uint8))
        grain = np.asarray(grain.filter(ImageFilter.GaussianBlur(1.0)), np.float32) - 128
        grain *= rng.uniform(10, 30) / grain.std()
        noisy = (np.asarray(img, np.float32) + grain[..., None]
                 + rng.normal(0, 5, (h, w, 3)))
        folder = os.path.join(tmp, "class_%02d" % c)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "%05d.jpg" % i)
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(path, quality=90)
        total += os.path.getsize(path)
    open(os.path.join(tmp, "DONE"), "w").close()
    shutil.rmtree(args.dir, ignore_errors=True)
    os.rename(tmp, args.dir)
    print("bench_images: %d JPEGs of %dx%d, %.0f KB each on average, in %s"
          % (args.count, w, h, total / args.count / 1024, args.dir), file=sys.stderr)


def cpu_seconds(pids):
    """User + system CPU seconds of the processes so far (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def run_torchvision(args):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    from torchvision import datasets, transforms

    # DataLoader's workers run with one torch thread each already; the main process only
    # receives batches.
    torch.set_num_threads(1)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(args.image_size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    data = datasets.ImageFolder(args.images, transform=transform)
    # shuffle=True's sampler drawing many epochs' worth in one: the small folder's epoch ends
    # would otherwise drain and refill the workers' queue every few seconds, which ImageNet's
    # 1.28M-image epochs do not.
    sampler = RandomSampler(data, num_samples=len(data) * 10000)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler,
                        num_workers=args.workers, drop_last=True)
    batches = iter(loader)
    warm_until = time.monotonic() + args.warmup
    while time.monotonic() < warm_until:
        next(batches)
    pids = [os.getpid()] + [w.pid for w in batches._workers]
    cpu0 = cpu_seconds(pids)
    t0 = time.monotonic()
    done = 0
    while time.monotonic() - t0 < args.seconds:
        images, _ = next(batches)
        done += images.shape[0]
    wall = time.monotonic() - t0
    cpu = cpu_seconds(pids) - cpu0
    rate = done / wall
    print("torchvision: %.1f images/s with %d worker%s (%.1f per worker); %d images in %.2f s, "
          "%.2f CPU-seconds a second" % (rate, args.workers, "" if args.workers == 1 else "s",
                                         rate / args.workers, done, wall, cpu / wall))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--dir", required=True)
    gen.add_argument("--count", type=int, default=1600)
    gen.add_argument("--classes", type=int, default=10)
    tv = sub.add_parser("torchvision")
    tv.add_argument("--images", required=True)
    tv.add_argument("--workers", type=int, default=1)
    tv.add_argument("--batch_size", type=int, default=64)
    tv.add_argument("--warmup", type=float, default=2)
    tv.add_argument("--seconds", type=float, default=10)
    tv.add_argument("--image_size", type=int, default=224)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
    else:
        if args.workers < 1:
            parser.error("--workers must be at least 1")
        run_torchvision(args)


if __name__ == "__main__":
    main()
