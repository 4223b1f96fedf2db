#!/usr/bin/env python3
"""CPU training throughput of Cohort against PyTorch eager, interleaved in one sitting.

Each round runs, for every case (model:batch), one fresh process each of:
  cohort blocked   //trainer:bench --layout blocked (activations held in oneDNN's blocked layouts)
  cohort plain     //trainer:bench --layout plain (every activation NCHW)
  torch NCHW       tools/gpu/torch_resnet_bench.py --device cpu --no_channels_last
  torch CL         the same with channels_last
and, with --before BENCH, an older build of //trainer:bench. Rounds interleave the programs so
that the shared machine's drift falls on all of them; the table gives each column's median
images/sec over the rounds and Cohort's ratios to PyTorch. LeNet has no PyTorch column.

    bazel build //trainer:bench
    /usr/bin/python3 tools/bench/cpu_vs_torch.py --rounds 3 resnet20:128 resnet50:32
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_BENCH = os.path.join(HERE, "..", "gpu", "torch_resnet_bench.py")
TORCH_MODELS = ("resnet20", "resnet50", "resnet56", "googlenet")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cases", nargs="+", help="model:batch, e.g. resnet20:128")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10,
                   help="timed steps (//trainer:bench runs a fifth for ImageNet models; so does PyTorch here)")
    p.add_argument("--bench", default="bazel-bin/trainer/bench")
    p.add_argument("--before", help="an older //trainer:bench binary to run beside it")
    p.add_argument("--python", default="/usr/bin/python3", help="a Python with torch")
    args = p.parse_args(argv)
    for c in args.cases:
        if not re.fullmatch(r"[a-z0-9]+:[0-9]+", c):
            p.error(f"case {c!r} is not model:batch")
    return args


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"cpu_vs_torch: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


def cohort_ips(bench, model, batch, steps, layout):
    cmd = [bench, f"--cases={model}:{batch}", f"--steps={steps}", "--warmup_steps=2"]
    if layout:
        cmd.append(f"--layout={layout}")
    for line in run(cmd).splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] == model and f[1] == str(batch):
            return float(f[2])
    sys.exit(f"cpu_vs_torch: no {model}:{batch} line from {bench}")


def torch_ips(python, model, batch, steps, channels_last):
    if model in ("resnet50", "googlenet"):
        steps = max(2, steps // 5)
    cmd = [python, TORCH_BENCH, "--device=cpu", "--precision=fp32", f"--model={model}",
           f"--batch_size={batch}", f"--steps={steps}", "--warmup=2"]
    if not channels_last:
        cmd.append("--no_channels_last")
    m = re.search(r": ([0-9.]+) images/sec", run(cmd))
    if not m:
        sys.exit(f"cpu_vs_torch: no images/sec from {' '.join(cmd)}")
    return float(m.group(1))


def main(argv=None):
    args = parse_args(argv)
    columns = ["cohort blocked", "cohort plain", "torch NCHW", "torch CL"]
    if args.before:
        columns.append("cohort before")
    figures = {c: {col: [] for col in columns} for c in args.cases}
    for r in range(args.rounds):
        for case in args.cases:
            model, batch = case.split(":")
            got = figures[case]
            got["cohort blocked"].append(cohort_ips(args.bench, model, batch, args.steps, "blocked"))
            if model in TORCH_MODELS:
                got["torch NCHW"].append(torch_ips(args.python, model, batch, args.steps, False))
            got["cohort plain"].append(cohort_ips(args.bench, model, batch, args.steps, "plain"))
            if model in TORCH_MODELS:
                got["torch CL"].append(torch_ips(args.python, model, batch, args.steps, True))
            if args.before:
                got["cohort before"].append(cohort_ips(args.before, model, batch, args.steps, None))
            print(f"# round {r + 1} {case}: " +
                  ", ".join(f"{col} {v[-1]:.1f}" for col, v in got.items() if v), flush=True)

    def med(v):
        return statistics.median(v) if v else float("nan")

    print("\n| case | " + " | ".join(columns) + " | blocked / torch NCHW | blocked / torch CL | blocked / plain |")
    print("|---" * (len(columns) + 4) + "|")
    for case in args.cases:
        m = {col: med(v) for col, v in figures[case].items()}
        cells = [f"{m[col]:.1f}" if m[col] == m[col] else "-" for col in columns]
        ratios = [m["cohort blocked"] / m[d] if m[d] == m[d] else float("nan")
                  for d in ("torch NCHW", "torch CL", "cohort plain")]
        print(f"| {case} | " + " | ".join(cells) + " | " +
              " | ".join(f"{x:.2f}x" if x == x else "-" for x in ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
