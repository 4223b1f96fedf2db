#!/usr/bin/python3
"""Where a local job's CPU time goes: runs the job, records the kernel's context switches on
every CPU for a window of it (perf sched record; Debian's linux-perf), and prints the CPU time
of that window by process and thread (each of the job's processes by name, its main thread as
"main", its other threads by their names; idle; whatever is not the job's as "other"), as
shares of the CPU time recorded.

  tools/bench/cpu_budget.py --at 6 --seconds 1 -- bazel-bin/tools/launch/launch -n 2 -s 2 -- \\
      --model lenet --dataset fashion-mnist --epochs 1 --output=

Exact where sampling is not (a switch's time stamps, not samples). A worker's main thread runs
forward and backward and also makes the kvstore calls; its other threads (gRPC's, the fusion
timer, the prefetcher, all but gRPC's named like the process) and the shards do the rest."""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

# A line of `perf sched timehist`: when a thread was switched out, on which CPU, the thread
# ("<idle>", or name[tid/pid], name[pid] for a main thread; perf cuts it at 31 characters, so a
# long one loses its "]"), then wait, scheduling delay and run time in ms.
_LINE = re.compile(r"^\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
_TASK = re.compile(r"^(.*?)\[(-?\d+)(?:/(\d+))?\]?$")  # tid -1: a thread perf could not name


def parse_timehist(lines):
    """(runs, unread): (name, tid, pid, run seconds) per line, tid and pid None for <idle>; and
    how many lines that start with a time stamp could not be read."""
    runs, unread = [], 0
    for line in lines:
        m = _LINE.match(line)
        if not m:
            unread += bool(re.match(r"^\s*\d+\.\d+\s", line))
            continue
        seconds = float(m.group(6)) / 1000
        task = m.group(3).strip()
        if task == "<idle>":
            runs.append((task, None, None, seconds))
            continue
        t = _TASK.match(task)
        if not t:
            unread += 1
            continue
        tid = int(t.group(2))
        pid = int(t.group(3)) if t.group(3) else tid  # a main thread prints [pid] alone
        runs.append((t.group(1), tid, pid, seconds))
    return runs, unread


def budget(runs, roles):
    """CPU seconds by (role, thread): a role's main thread as "main", its other threads by name;
    idle; and "other" for whatever is not the job's. roles: pid -> process name."""
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


def job_processes(root):
    """pid -> name (its main thread's) of root and every process below it now."""
    parents, names = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":\t", 1) for line in f if ":\t" in line)
        except OSError:
            continue  # gone meanwhile
        parents[int(entry)] = int(fields["PPid"])
        names[int(entry)] = fields["Name"].strip()
    below = {}
    for pid in names:
        p = pid
        while p not in (0, root) and p in parents:
            p = parents[p]
        if p == root:
            below[pid] = names[pid]
    return below


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
        log_path = os.path.join(tmp, "job.log")
        with open(log_path, "w") as log:
            job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            time.sleep(args.at)
            if job.poll() is not None:
                sys.exit(f"cpu_budget: the job ended before {args.at:g} s (exit "
                         f"{job.returncode}); its output:\n{tail(log_path)}")
            # The job's processes as the window opens (they may have ended when it closes).
            roles = job_processes(job.pid)
            perf = subprocess.run(["perf", "sched", "record", "-o", record, "--", "sleep",
                                   str(args.seconds)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            if perf.returncode != 0:
                job.terminate()
                sys.exit(f"cpu_budget: perf sched record failed: {perf.stderr.strip()}\n"
                         "(it needs root, or kernel.perf_event_paranoid=-1, and Debian's "
                         "linux-perf)")
        except BaseException:  # interrupted, say: the job does not outlive this script
            job.terminate()
            raise
        finally:
            job.wait()
        if job.returncode != 0:
            sys.exit(f"cpu_budget: the job failed (exit {job.returncode}); its output:\n"
                     f"{tail(log_path)}")
        timehist = subprocess.run(["perf", "sched", "timehist", "-i", record],
                                  capture_output=True, text=True, check=True).stdout
    runs, unread = parse_timehist(timehist.splitlines())
    totals = budget(runs, roles)
    recorded = sum(totals.values())  # every CPU's time between its first and last switch
    print(f"{args.seconds:g} s on {os.cpu_count()} CPUs, {recorded:.3f} CPU-seconds recorded, "
          f"from {args.at:g} s into: {' '.join(command)}")
    if unread:
        print(f"({unread} lines of perf sched timehist could not be read and are left out)")
    print(f"{'role':10s} {'thread':18s} {'CPU s':>7s} {'share':>7s}")
    for (role, thread), seconds in totals.most_common():
        print(f"{role:10s} {thread:18s} {seconds:7.3f} {100 * seconds / recorded:6.1f}%")


def tail(path, lines=20):
    with open(path) as f:
        return "".join(f.readlines()[-lines:])


if __name__ == "__main__":
    main()
