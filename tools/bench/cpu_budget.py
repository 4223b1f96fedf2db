#!/usr/bin/python3
"""Where a local job's CPU time goes: runs the job, records the kernel's context switches on
every CPU for a window of it (perf sched record; Debian's linux-perf), and prints the CPU time
of that window by role and thread (the roles' main threads, which compute; gRPC's threads; the
others), idle included, as shares of all CPUs' time.

  tools/bench/cpu_budget.py --at 6 --seconds 1 -- bazel-bin/tools/launch/launch -n 2 -s 2 -- \\
      --model lenet --dataset fashion-mnist --epochs 1 --output=

Exact where sampling is not (a switch's time stamps, not samples): on a machine whose cores the
job fills, what is not a worker's main thread is what the data path costs the training."""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

# A line of `perf sched timehist`: when a thread was switched out, on which CPU, its name,
# [tid/pid] (or [pid] for a main thread), then wait, scheduling delay and run time in ms.
# <idle> has no ids.
_LINE = re.compile(r"^\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)(?:\[(\d+)(?:/(\d+))?\])?\s+"
                   r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def parse_timehist(lines):
    """(name, tid, pid, run seconds) per line; tid and pid are None for <idle>."""
    runs = []
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        name, tid, pid = m.group(3).strip(), m.group(4), m.group(5)
        tid = int(tid) if tid else None
        pid = int(pid) if pid else tid  # a main thread prints [pid] alone
        runs.append((name, tid, pid, float(m.group(8)) / 1000))
    return runs


def budget(runs, roles):
    """CPU seconds by (role, thread kind). roles: pid -> the process's name (worker, shard, ...)."""
    totals = collections.Counter()
    for name, tid, pid, seconds in runs:
        if tid is None:
            key = ("idle", "")
        elif pid in roles:
            key = (roles[pid], "main" if tid == pid else name)
        else:
            key = ("other", "")
        totals[key] += seconds
    return totals


def process_names():
    """pid -> name of every process now (its main thread's name)."""
    names = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    names[int(entry)] = f.read().strip()
            except OSError:
                pass  # gone meanwhile
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--at", type=float, default=6, help="seconds after the start (default 6)")
    parser.add_argument("--seconds", type=float, default=1, help="window length (default 1)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the job's command after --")
    with tempfile.TemporaryDirectory() as tmp:
        record = os.path.join(tmp, "sched.data")
        with open(os.path.join(tmp, "job.log"), "w") as log:
            job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            try:
                time.sleep(args.at)
                if job.poll() is not None:
                    sys.exit(f"cpu_budget: the job ended before {args.at} s (exit {job.returncode})")
                # The job's processes as the window opens (they may have ended when it closes).
                roles = {pid: name for pid, name in process_names().items()
                         if name in ("worker", "shard", "scheduler", "launch", "train")}
                subprocess.run(["perf", "sched", "record", "-o", record, "--", "sleep",
                                str(args.seconds)], check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            finally:
                job.wait()
        timehist = subprocess.run(["perf", "sched", "timehist", "-i", record],
                                  capture_output=True, text=True, check=True).stdout
    totals = budget(parse_timehist(timehist.splitlines()), roles)
    all_cpus = args.seconds * os.cpu_count()
    print(f"{args.seconds:g} s on {os.cpu_count()} CPUs ({all_cpus:g} CPU-seconds), "
          f"from {args.at:g} s into: {' '.join(command)}")
    print(f"{'role':10s} {'thread':18s} {'CPU s':>7s} {'share':>7s}")
    for (role, thread), seconds in totals.most_common():
        print(f"{role:10s} {thread:18s} {seconds:7.3f} {100 * seconds / all_cpus:6.1f}%")


if __name__ == "__main__":
    main()
