#!/usr/bin/python3
"""profile_ps_round: where the CPU goes during bench_ps's W1S1 100 MB push+pull rounds.

Runs the W1S1 job of //tools/bench:bench_ps (one shard, one ps_worker, 25 x 4 MB tensors) under
`perf record -a` (root), keeps only the samples taken while a round is in flight (the worker's
main thread is then blocked; it runs `main` only to fill and check values between rounds), and
prints each process's share of the CPU by kind of work. With --tls, the job over gRPC
(COHORT_SHARED_MEMORY=0) plaintext and then with `launch --tls`, in the same run: each kind of
work in CPU milliseconds per round, and what TLS adds to it.

  bazel run //tools/bench:profile_ps_round    # needs perf (Debian linux-perf) and root
  bazel run //tools/bench:profile_ps_round -- --tls
"""

import argparse
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


SAMPLES_PER_SECOND = 2000


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
    if name.startswith("libcrypto"):
        return "cipher (libcrypto)"
    if name.startswith("libssl"):
        return "TLS records (libssl)"
    if name.startswith("libgrpc") or name.startswith("libgpr"):
        return "gRPC"
    return "other libraries (libc, absl)"


def profile(tls=False, env=None, rounds=60):
    """The job's samples inside rounds by (process, kind), their total, and its output."""
    with tempfile.TemporaryDirectory() as tmp:
        job = subprocess.Popen(
            [program("tools/launch/launch"), "-n", "1", "-s", "1", *(["--tls"] if tls else []),
             "--scheduler_binary", program("services/scheduler/scheduler"),
             "--shard_binary", program("services/shard/shard"),
             "--", program("tools/bench/ps_worker"), "--tensors=25", "--tensor_bytes=4000000",
             "--warmup=2", f"--rounds={rounds}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})})
        time.sleep(3)
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-a", "-F", str(SAMPLES_PER_SECOND), "-o", data, "--",
                        "sleep", "3"], check=True, capture_output=True)
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
    return shares, total, re.search(r"ps_worker: .*", out).group(0)


def per_round_ms(shares, total, result):
    """CPU milliseconds per round of each kind of work, both processes together."""
    median_s = float(re.search(r"median_ms ([\d.]+)", result).group(1)) / 1000
    rounds = total / SAMPLES_PER_SECOND / 2 / median_s  # two cores sampled
    ms = collections.Counter()
    for (who, what), n in shares.items():
        if who in ("worker", "shard"):
            ms[what] += 1000 * n / SAMPLES_PER_SECOND / rounds
    return ms, median_s * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tls", action="store_true",
                        help="over gRPC, plaintext then TLS: CPU ms per round by kind of work")
    args = parser.parse_args()
    if not args.tls:
        shares, total, result = profile()
        print(f"profile_ps_round: {total} samples inside rounds; share of both cores' time:")
        for (who, what), n in shares.most_common():
            print(f"  {who:<7} {what:<32} {100 * n / total:5.1f}%")
        print(result)
        return
    grpc_only = {"COHORT_SHARED_MEMORY": "0"}
    plain, plain_round = per_round_ms(*profile(False, grpc_only, 150))
    tls, tls_round = per_round_ms(*profile(True, grpc_only, 60))
    print(f"profile_ps_round --tls: W1S1 100 MB over gRPC; round {plain_round:.1f} ms plaintext, "
          f"{tls_round:.1f} ms TLS; CPU ms per round, shard and worker together:")
    print(f"  {'work':<32} {'plain':>8} {'TLS':>8} {'added':>8}")
    for what in sorted(set(plain) | set(tls), key=lambda w: -(tls[w] - plain[w])):
        print(f"  {what:<32} {plain[what]:8.1f} {tls[what]:8.1f} {tls[what] - plain[what]:+8.1f}")
    print(f"  {'all':<32} {sum(plain.values()):8.1f} {sum(tls.values()):8.1f} "
          f"{sum(tls.values()) - sum(plain.values()):+8.1f}")


if __name__ == "__main__":
    main()
