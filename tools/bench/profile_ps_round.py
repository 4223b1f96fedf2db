#!/usr/bin/python3
"""profile_ps_round: where the CPU goes during bench_ps's W1S1 100 MB push+pull rounds.

Runs the W1S1 job of //tools/bench:bench_ps (one shard, one ps_worker, 25 x 4 MB tensors) under
`perf record -a` (root), keeps only the samples taken while a round is in flight (the worker's
main thread is then blocked; it runs `main` only to fill and check values between rounds), and
prints each process's share of the CPU by kind of work.

  bazel run //tools/bench:profile_ps_round    # needs perf (Debian linux-perf) and root
"""

import collections
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ps import program  # noqa: E402

SAMPLE = re.compile(r"\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(\S+)\s+\((.*)\)")
BIN_SECONDS = 0.002  # a bin in which the worker's main thread ran `main` is between rounds


def kind(symbol, dso):
    if symbol in ("_copy_to_iter", "_copy_from_iter"):
        return "kernel socket copies"
    if "kallsyms" in dso:
        return "kernel, rest of the TCP path"
    if symbol.startswith("__memmove") or symbol.startswith("__memcpy"):
        return "memcpy"
    name = os.path.basename(dso)
    if name in ("shard", "ps_worker"):
        return "Cohort code (optimizer, mean)"
    return "libraries (gRPC, libc, absl)"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        job = subprocess.Popen(
            [program("tools/launch/launch"), "-n", "1", "-s", "1",
             "--scheduler_binary", program("services/scheduler/scheduler"),
             "--shard_binary", program("services/shard/shard"),
             "--", program("tools/bench/ps_worker"), "--tensors=25", "--tensor_bytes=4000000",
             "--warmup=2", "--rounds=60"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(3)
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-a", "-F", "2000", "-o", data, "--", "sleep", "3"],
                       check=True, capture_output=True)
        out, _ = job.communicate(timeout=600)
        if job.returncode != 0:
            sys.exit(f"profile_ps_round: error: the job failed:\n{out}")
        script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,ip,sym,dso"],
                                check=True, capture_output=True, text=True).stdout
    samples = [m.groups() for m in map(SAMPLE.match, script.splitlines()) if m]
    worker = next(int(p) for c, p, t, *_ in samples if c == "ps_worker" and p == t)
    shard = next(int(p) for c, p, *_ in samples if c == "shard")
    between = {int(float(t) / BIN_SECONDS) for c, p, tid, t, sym, _ in samples
               if int(p) == worker and p == tid and sym == "main"}
    shares = collections.Counter()
    total = 0
    for comm, pid, _, t, sym, dso in samples:
        if int(float(t) / BIN_SECONDS) in between:
            continue
        total += 1
        who = {worker: "worker", shard: "shard"}.get(int(pid), "idle" if comm == "swapper" else "other")
        shares[(who, "idle" if who == "idle" else kind(sym, dso))] += 1
    print(f"profile_ps_round: {total} samples inside rounds; share of both cores' time:")
    for (who, what), n in shares.most_common():
        print(f"  {who:<7} {what:<32} {100 * n / total:5.1f}%")
    print(re.search(r"ps_worker: .*", out).group(0))


if __name__ == "__main__":
    main()
