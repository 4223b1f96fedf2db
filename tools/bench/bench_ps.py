#!/usr/bin/python3
"""bench_ps: push+pull throughput of Cohort's parameter-server data path.

Starts real jobs through the launcher (a scheduler, S shard processes and W ps_worker
processes on this host: pushes and answers through shared-memory rings, the rest gRPC over TCP
on 127.0.0.1; COHORT_SHARED_MEMORY=0 keeps all of it on gRPC). Each worker pushes a model's
gradients and pulls the updated values through the training kvstore (dist_sync), round after
round, and checks every pulled value against the expected sum. Beside it, iperf3 measures the
same machine's single-stream TCP bandwidth in the same run, and (`--bidir`) what one TCP
connection carries both ways at once: the kernel's ceiling for a push+pull over gRPC, which
moves data both ways (the rings do not go through TCP).

  bazel run //tools/bench:bench_ps               # the full matrix
  bazel run //tools/bench:bench_ps -- --quick    # fewer rounds
  bazel run //tools/bench:bench_ps -- --tls      # each job plaintext, then over mutual TLS + token
  bazel run //tools/bench:bench_ps -- --fusion_bytes 0                # small parts unfused
  bazel run //tools/bench:bench_ps -- --gradient_compression none,fp16,bf16,2bit
  bazel run //tools/bench:bench_ps -- --replicas   # W2S2 with --shard_replicas=2 against without

GB/s per worker = 2 x model bytes / median round time.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys


def runfiles_root():
    for candidate in (os.environ.get("RUNFILES_DIR"), sys.argv[0] + ".runfiles"):
        if candidate and os.path.isdir(os.path.join(candidate, "cohort")):
            return os.path.join(candidate, "cohort")
    return os.getcwd()


def program(relative):
    path = os.path.join(runfiles_root(), relative)
    if not os.access(path, os.X_OK):
        sys.exit(f"bench_ps: error: {relative} is missing; run through "
                 "`bazel run //tools/bench:bench_ps`")
    return os.path.abspath(path)


def iperf3_gbps(seconds, bidir=False, address="127.0.0.1", server_ns=(), client_ns=(),
                streams=1):
    """`streams` TCP connections to `address` for `seconds`, as iperf3 measures them (receiver
    side, summed; with bidir, both directions at once, summed). server_ns, client_ns: the
    commands' prefixes (e.g. `ip netns exec NS`) where they run elsewhere."""
    for _ in range(20):
        port = random.randint(20000, 60000)
        server = subprocess.Popen(
            [*server_ns, "iperf3", "-s", "-1", "--forceflush", "-B", address, "-p", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            listening = False
            for line in server.stdout:
                if "listening" in line:
                    listening = True
                    break
            if not listening:  # the port was taken: try another one
                continue
            client = subprocess.run(
                [*client_ns, "iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "-J",
                 "-P", str(streams)]
                + (["--bidir"] if bidir else []),
                capture_output=True, text=True, timeout=seconds + 60)
            if client.returncode != 0:
                sys.exit(f"bench_ps: error: iperf3 client failed: {client.stdout}{client.stderr}")
            end = json.loads(client.stdout)["end"]
            bits = end["sum_received"]["bits_per_second"]
            if bidir:
                bits += end["sum_received_bidir_reverse"]["bits_per_second"]
            return bits / 8e9
        finally:
            if server.poll() is None:
                server.kill()
            server.wait()
    sys.exit("bench_ps: error: iperf3 found no free port in 20 tries")


def bits_per_second(rate):
    """A tc-style rate ("1gbit", "100mbit", "25gbit") in bits per second."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
    if not m:
        sys.exit(f"error: rate {rate!r}: expected e.g. 1gbit or 100mbit")
    return float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]]


RESULT = re.compile(r"ps_worker: rank (\d+) tensors (\d+) bytes (\d+) rounds (\d+) "
                    r"median_ms ([\d.]+) min_ms ([\d.]+) gbps ([\d.]+) checked (\d+)")


def run_job(workers, shards, tensors, tensor_bytes, warmup, rounds, tls, env=None,
            check=True, launch_flags=()):
    """Median round and GB/s of each worker. env: COHORT_* settings of the workers (e.g.
    COHORT_FUSION_BYTES); check: whether they check every pulled value; launch_flags: more of
    the launcher's flags."""
    command = [
        program("tools/launch/launch"), "-n", str(workers), "-s", str(shards),
        *(["--tls"] if tls else []), *launch_flags,
        "--scheduler_binary", program("services/scheduler/scheduler"),
        "--shard_binary", program("services/shard/shard"),
        "--", program("tools/bench/ps_worker"), f"--tensors={tensors}",
        f"--tensor_bytes={tensor_bytes}", f"--warmup={warmup}", f"--rounds={rounds}",
        f"--check={'true' if check else 'false'}",
    ]
    job = subprocess.run(command, capture_output=True, text=True, timeout=600,
                         env={**os.environ, **(env or {})})
    results = [RESULT.search(line) for line in job.stdout.splitlines()]
    results = [m for m in results if m]
    if job.returncode != 0 or len(results) != workers:
        sys.exit(f"bench_ps: error: the W{workers}S{shards} job failed (exit {job.returncode}):\n"
                 f"{job.stdout}{job.stderr}")
    return [{"rank": int(m[1]), "median_ms": float(m[5]), "min_ms": float(m[6]),
             "gbps": float(m[7]), "checked": int(m[8])} for m in results]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--iperf_seconds", type=int, default=5)
    parser.add_argument("--tls", action="store_true",
                        help="run every job twice in a row: plaintext, then mutual TLS + token")
    parser.add_argument("--only", action="append",
                        help="run only this case (by its name, e.g. '1000 x 4 KB'); repeatable")
    parser.add_argument("--fusion_bytes", type=int,
                        help="the workers' --fusion_bytes (default: theirs, 256 KiB; 0: none)")
    parser.add_argument("--gradient_compression",
                        help="instead: W2S2 100 x 1 MB with each of these comma-separated modes "
                             "(none, fp16, bf16, 2bit), the bytes each puts on the wire")
    parser.add_argument("--replicas", action="store_true",
                        help="instead: each case W2S2 with --shard_replicas=2 against without, "
                             "over shared memory and over gRPC, in pairs")
    args = parser.parse_args()
    env = {} if args.fusion_bytes is None else {"COHORT_FUSION_BYTES": str(args.fusion_bytes)}
    if args.gradient_compression:
        compression_sweep(args.gradient_compression.split(","), 3 if args.quick else 10, env)
        return
    timed = 3 if args.quick else 10
    cases = [  # (name, tensors, bytes per tensor, warm-up rounds, timed rounds)
        ("100 MB (25 x 4 MB)", 25, 4_000_000, 2, timed),
        ("100 x 1 MB", 100, 1 << 20, 2, timed),
        ("1000 x 4 KB", 1000, 4096, 5, 5 * timed),
    ]
    if args.only:
        cases = [c for c in cases if c[0] in args.only]
    if args.replicas:
        replica_comparison(cases, env)
        return
    print(f"bench_ps: {os.cpu_count()} CPUs; jobs of 1 scheduler + S shards + W workers on "
          f"127.0.0.1; dist_sync; 1 MiB parts; fusion "
          f"{env.get('COHORT_FUSION_BYTES', 'the default')}", flush=True)
    rows = []
    for name, tensors, tensor_bytes, warmup, rounds in cases:
        for workers, shards in ((1, 1), (2, 2)):
            tcp = iperf3_gbps(args.iperf_seconds)
            both_ways = iperf3_gbps(args.iperf_seconds, bidir=True)
            for tls in ([False, True] if args.tls else [False]):
                transport = "TLS" if tls else "plain"
                results = run_job(workers, shards, tensors, tensor_bytes, warmup, rounds, tls,
                                  env)
                per_worker = min(r["gbps"] for r in results)
                median_ms = max(r["median_ms"] for r in results)
                checked = sum(r["checked"] for r in results)
                rows.append((name, workers, shards, transport, median_ms, per_worker, tcp,
                             both_ways))
                print(f"  {name:<20} W{workers}S{shards} {transport:<5}: round {median_ms:8.2f} "
                      f"ms, {per_worker:6.3f} GB/s per worker, single-stream TCP {tcp:5.2f} GB/s "
                      f"({100 * per_worker / tcp:5.1f}%), both ways {both_ways:5.2f} GB/s "
                      f"({100 * per_worker / both_ways:5.1f}%), {checked:,} values checked",
                      flush=True)
    print()
    print("| model | W | S | transport | round (median) | GB/s per worker | iperf3 single stream "
          "| ratio | iperf3 --bidir | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, workers, shards, transport, median_ms, gbps, tcp, both_ways in rows:
        print(f"| {name} | {workers} | {shards} | {transport} | {median_ms:.2f} ms | {gbps:.3f} | "
              f"{tcp:.2f} GB/s | {100 * gbps / tcp:.0f}% | {both_ways:.2f} GB/s | "
              f"{100 * gbps / both_ways:.0f}% |")
    # Small tensors against large ones, job for job in this run.
    speed = {(r[0], r[1], r[3]): r[5] for r in rows}
    for (name, workers, transport), gbps in speed.items():
        large = speed.get(("100 x 1 MB", workers, transport))
        if name == "1000 x 4 KB" and large:
            print(f"1000 x 4 KB against 100 x 1 MB, W{workers}S{workers} {transport}: "
                  f"{100 * gbps / large:.0f}% of its GB/s")


def replica_comparison(cases, env, pairs=5):
    """W2S2 rounds with every part replicated (--shard_replicas=2: each update also goes to
    the part's backup shard before the workers hear it) against without, in alternating pairs
    of jobs; the median of each side's rounds. Five pairs: on a shared machine one job in a few
    runs 10-15% off its neighbours (measured: 4 KB rounds of the same build 5.8-6.9 ms)."""
    print(f"bench_ps: {os.cpu_count()} CPUs; W2S2 on 127.0.0.1, dist_sync, --shard_replicas=2 "
          f"against 1, {pairs} pairs of jobs each", flush=True)
    print()
    print("| model | worker-shard path | round, 1 copy | round, 2 copies | ratio |")
    print("|---|---|---|---|---|")
    for name, tensors, tensor_bytes, warmup, rounds in cases:
        # Small parts' rounds take milliseconds: four times as many make a steadier median.
        if tensor_bytes < (1 << 20):
            rounds *= 4
        for path, path_env in (("shared memory", {}), ("gRPC", {"COHORT_SHARED_MEMORY": "0"})):
            rounds_ms = {1: [], 2: []}
            for _ in range(pairs):
                for copies in (1, 2):
                    results = run_job(2, 2, tensors, tensor_bytes, warmup, rounds, False,
                                      {**env, **path_env},
                                      launch_flags=[f"--shard_replicas={copies}"])
                    rounds_ms[copies].append(max(r["median_ms"] for r in results))
            one, two = (sorted(rounds_ms[c])[len(rounds_ms[c]) // 2] for c in (1, 2))
            print(f"| {name} | {path} | {one:.2f} ms | {two:.2f} ms | {two / one:.2f}x |",
                  flush=True)


# Bytes a value takes on the wire: (pushed, pulled) per F32 value (wire_encoding.h).
WIRE_BYTES = {"none": (4, 4), "fp16": (2, 2), "bf16": (2, 2), "2bit": (0.25, 4)}


def compression_sweep(modes, timed, env):
    """W2S2 100 x 1 MB rounds with each gradient compression: the round, the model's GB/s per
    worker and the bytes each worker puts on the wire."""
    print(f"bench_ps: {os.cpu_count()} CPUs; W2S2 100 x 1 MB on 127.0.0.1, dist_sync, by "
          f"--gradient_compression (values checked with none only)", flush=True)
    print()
    print("| compression | round (median) | model GB/s per worker | wire MB per worker per round "
          "(push + pull) | wire GB/s per worker |")
    print("|---|---|---|---|---|")
    tensors, tensor_bytes = 100, 1 << 20
    for mode in modes:
        results = run_job(2, 2, tensors, tensor_bytes, 2, timed, False,
                          {**env, "COHORT_GRADIENT_COMPRESSION": mode}, check=mode == "none")
        median_ms = max(r["median_ms"] for r in results)
        values = tensors * tensor_bytes / 4
        push, pull = WIRE_BYTES[mode]
        wire = values * (push + pull)
        print(f"| {mode} | {median_ms:.2f} ms | {2 * tensors * tensor_bytes / median_ms / 1e6:.3f} "
              f"| {wire / 1e6:.1f} ({values * push / 1e6:.1f} + {values * pull / 1e6:.1f}) | "
              f"{wire / median_ms / 1e6:.3f} |", flush=True)


if __name__ == "__main__":
    main()
