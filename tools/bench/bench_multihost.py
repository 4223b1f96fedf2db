#!/usr/bin/python3
"""bench_multihost: a LeNet job on three hosts (network namespaces with their own sshd, see
tests/netns_cluster.py) over ssh and mutual TLS, with every host's link unshaped and then shaped
with tc tbf, against the ideal the link rate and the model size allow. Needs root.

  bazel run //tools/bench:bench_multihost                    # unshaped, 1gbit, 100mbit
  bazel run //tools/bench:bench_multihost -- --rates 1gbit --epochs 2

Placement as launch.py: on each host one shard and one worker (the scheduler on the first). Per
dist_sync step a worker pushes the whole model and pulls it back; a third of it stays on its own
host. So each host's link carries, each way, its worker's pushes to the two other shards (2M/3)
and its shard's answers to the two other workers (2M/3): 4M/3 bytes per step, M the model's
bytes. Ideal communication time per step = (4M/3) / (rate / 8); the ideal Comm% is that over
the measured step time, and the link alone would allow global_batch / that images/sec.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

LENET_PARAMETERS = 61_706  # float32: conv1 6x1x5x5+6, conv2 16x6x5x5+16, fc 400x120+120, ...


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ps import bits_per_second, program, runfiles_root  # noqa: E402

sys.path.insert(0, os.path.join(runfiles_root(), "tests"))
sys.path.insert(0, os.path.join(runfiles_root(), "tools/launch"))
from job_processes import kill_job  # noqa: E402
from netns_cluster import Cluster  # noqa: E402


def run_job(cluster, root, job_id, epochs, batch):
    a = cluster.addresses
    hosts = os.path.join(root, "hosts")
    with open(hosts, "w") as f:
        f.write("".join(f"{address} slots=1\n" for address in a))
    log_json = os.path.join(root, f"{job_id}.jsonl")
    command = cluster.in_launcher_ns([
        program("tools/launch/launch"), f"--job_id={job_id}", "-n", "3", "-s", "3", "-H", hosts,
        f"--ssh_identity={cluster.identity}",
        "--ssh_options=" + " ".join(cluster.ssh_args()[2:]), "--env=OMP_NUM_THREADS=1", "--",
        "--model=lenet", "--dataset=fashion-mnist", "--output=", f"--epochs={epochs}",
        f"--batch_size={batch}", "--log_interval=20", f"--log_json={log_json}"])
    try:
        job = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=root)
    finally:
        kill_job(job_id)
    if job.returncode != 0:
        sys.exit(f"bench_multihost: error: job {job_id} failed:\n{job.stdout}{job.stderr}")
    speeds = [float(m) for m in re.findall(r"worker 0\] Epoch \d+: [\d.]+ s .*?, ([\d.]+) img/s",
                                           job.stdout)]
    with open(log_json) as f:
        rows = [json.loads(line) for line in f]
    comm = [r["comm_overhead"] for r in rows[1:]] or [r["comm_overhead"] for r in rows]
    return sum(speeds) / len(speeds), sum(comm) / len(comm)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="unshaped,1gbit,100mbit",
                        help="comma-separated: unshaped, or a tc rate such as 1gbit")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=64, help="per worker")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_multihost: needs root (network namespaces, tc)")
    model_bytes = 4 * LENET_PARAMETERS
    global_batch = 3 * args.batch_size
    root = tempfile.mkdtemp(prefix="bench-multihost-")
    cluster = Cluster(root, 3)
    rows = []
    try:
        cluster.start()
        print(f"bench_multihost: {os.cpu_count()} CPUs shared by 3 hosts; LeNet ({model_bytes:,} "
              f"bytes), 1 scheduler + 3 shards + 3 workers, batch {args.batch_size} per worker, "
              f"{args.epochs} epoch(s), mutual TLS", flush=True)
        for i, rate in enumerate(args.rates.split(",")):
            if rate != "unshaped":
                cluster.shape(rate)
            speed, comm = run_job(cluster, root, f"bench-mh-{os.getpid()}-{i}", args.epochs,
                                  args.batch_size)
            step_s = global_batch / speed
            if rate == "unshaped":
                ideal_comm_s = None
            else:
                ideal_comm_s = (4 * model_bytes / 3) / (bits_per_second(rate) / 8)
            rows.append((rate, speed, step_s, comm, ideal_comm_s))
            ideal = ("" if ideal_comm_s is None else
                     f"; ideal comm {1e3 * ideal_comm_s:.2f} ms/step = "
                     f"{100 * ideal_comm_s / step_s:.1f}% of the step, link-bound "
                     f"{global_batch / ideal_comm_s:,.0f} img/s")
            print(f"  {rate:<9} {speed:8.1f} img/s, step {1e3 * step_s:6.1f} ms, "
                  f"Comm% {100 * comm:5.1f}{ideal}", flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    print()
    print("| link | images/sec (job) | step | Comm% measured | ideal comm per step | ideal Comm% "
          "| link-bound images/sec |")
    print("|---|---|---|---|---|---|---|")
    for rate, speed, step_s, comm, ideal_comm_s in rows:
        if ideal_comm_s is None:
            ideal = "- | - | -"
        else:
            ideal = (f"{1e3 * ideal_comm_s:.2f} ms | {100 * ideal_comm_s / step_s:.1f}% | "
                     f"{global_batch / ideal_comm_s:,.0f}")
        print(f"| {rate} | {speed:.1f} | {1e3 * step_s:.1f} ms | {100 * comm:.1f}% | {ideal} |")


if __name__ == "__main__":
    main()
