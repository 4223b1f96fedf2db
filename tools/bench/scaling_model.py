#!/usr/bin/python3
"""scaling_model: projects a Cohort job's step time, communication overhead and scaling
efficiency from a model's tensors, the compute time of a step, the links and the data path's
measured costs; validates the projection against real jobs on shaped links.

  bazel run //tools/bench:scaling_model -- --calibrate     # measure the costs here (~1 min)
  bazel run //tools/bench:scaling_model -- --validate      # root: jobs on shaped netns hosts
  bazel run //tools/bench:scaling_model -- --model resnet50 --link 25gbit --gpus_per_host 8 \\
      --gpu_images_per_second 1000 --batch_per_gpu 128      # W = 8 ... 256 GPUs

The model, per dist_sync step (every worker pushes every tensor and pulls its new value):
  - bytes: a worker pushes M·r_push and pulls M·r_pull (M the model's F32 bytes; r = 1 for
    none, 1/2 for fp16/bf16, 1/16 pushed and 1 pulled for 2bit). Shards hold 1/S of the bytes
    each. A host's link carries, each way, its workers' traffic to shards on other hosts and its
    shards' traffic to workers on other hosts: T_link = max over hosts and directions / rate,
    the rate being what TCP carries (a nominal Ethernet rate × 1448/1538).
  - CPU: each end (worker and shard) spends c_byte per byte, c_part per part and c_msg per
    message it sends or receives (parts smaller than --fusion_bytes share messages);
    T_cpu = a host's work / its data-path cores (validation: every "host" shares this
    machine's cores).
  - GPU workers: a worker's gradients cross its PCIe bus to the host and its values back
    (T_pcie), after a reduce over its own GPUs on NVLink when it drives several (T_nvlink).
  - T_comm = max(T_link, T_cpu, T_pcie, T_nvlink) + rtt + 2 × link latency (bytes, copies and
    CPU overlap in the pipeline; the last answer's round trip does not).
  - A training step: forward (a third of compute), then backward (two thirds) with the pushes
    overlapped: T_step = T_fwd + max(T_bwd, T_comm). Efficiency = T_compute / T_step.
Costs (c_byte, c_part, c_msg, rtt) come from W2S2 jobs over mutual TLS with every core busy
(100 × 1 MiB, and 1000 × 4 KiB fused and not; 1 × 4 KiB for the round trip): --calibrate runs
them on this machine's loopback; --validate on two of its netns hosts (their network path:
veth, bridge, netfilter), before it predicts the jobs on all of them.

The control plane, per job of N members (workers + shards; //tools/sim:member_sim measured
its costs against the real scheduler at 64 to 1,024 workers, tools/sim/bench_control_plane.sh):
  - heartbeats: every member beats every I(N) = clamp(N / 500 s, 250 ms, min(timeout / 3, 5 s))
    (the scheduler's HeartbeatIntervalFor), the timeout max(3 s, 3 I(N)) unless set
    (AutomaticHeartbeatTimeout); the scheduler spends c_heartbeat on each: CPU = N / I(N) ×
    c_heartbeat. A hung member is noticed within the timeout.
  - start: registration until RUNNING, c_register per member (they register at once).
  - a barrier (the start, a shard's recovery: two, an elastic regroup: two): the workers of a
    host meet there first (c_meet per worker of the host, on every host at once), then one call
    a host reaches the scheduler: hosts x c_barrier from the last arrival to the last release.
  - a generation change (a worker dies or joins): noticed at once when its stream ends, written
    to every member's control stream at once: c_push per member.
Neither is on a step's path (no barrier or scheduler call in a training step): they bound the
start, a recovery, and the scheduler's own host.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ps import (WIRE_BYTES, bits_per_second, iperf3_gbps, program, run_job,  # noqa: E402
                      runfiles_root)

# The costs --validate measured on two netns hosts of this project's 2-core VM, 2026-11-25
# (docs/benchmarks.md,
# "Scaling model"); --costs FILE or --calibrate replace them.
DEFAULT_COSTS = {"c_byte": 6.99e-10, "c_part": 1.35e-6, "c_msg": 7.23e-6, "rtt": 4.69e-4}
# The control plane's costs member_sim measured at 1,024 workers and 64 shards (each member a
# connection of its own) on this project's 2-core VM with the simulator on the same cores,
# 2026-11-27 (docs/benchmarks.md, "The control plane ... simulated"): upper bounds. c_barrier:
# the scheduler's CPU a call bringing a host's 8 arrivals (13 ms a barrier of 128 such calls;
# a worker alone costs it 0.07 ms), c_meet: a meeting of 8 on one host, 0.2 ms a barrier
# (2026-11-28).
CONTROL_COSTS = {"c_heartbeat": 188e-6, "c_register": 1.25e-3, "c_barrier": 0.1e-3,
                 "c_meet": 0.025e-3, "c_push": 0.1e-3}
HEARTBEAT_TIMEOUT_S = 3.0  # the least; a larger job's is longer (heartbeat_timeout)
# A nominal Ethernet rate's share that is TCP payload: 1448 bytes (1500-byte MTU less IP, TCP
# and timestamp headers) of each 1538 on the wire (Ethernet header, FCS, preamble, gap).
TCP_PAYLOAD = 1448 / 1538
PART_BYTES = 1 << 20
FUSION_BYTES = 256 << 10
# (pushed, pulled) bytes per F32 byte, by --gradient_compression.
COMPRESSION = {mode: (push / 4, pull / 4) for mode, (push, pull) in WIRE_BYTES.items()}


@dataclass
class Costs:
    c_byte: float  # CPU seconds per byte at one end (worker or shard)
    c_part: float  # CPU seconds per part at one end
    c_msg: float   # CPU seconds per message at one end
    rtt: float     # one push+pull round trip of a small tensor, nothing else running (s)


def model_elements(name):
    out = subprocess.run([program("tools/bench/model_tensors"), f"--model={name}"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["elements"]


def parts_of(elements, part_bytes=PART_BYTES):
    """The parts' byte sizes: each tensor split into near-equal parts of at most part_bytes."""
    parts = []
    for n in elements:
        count = max(1, math.ceil(4 * n / part_bytes))
        parts += [4 * n / count] * count
    return parts


def messages(part_sizes, fusion_bytes):
    """Messages that carry these parts of one shard: small ones fused up to fusion_bytes."""
    if fusion_bytes <= 0:
        return len(part_sizes)
    small = sum(b for b in part_sizes if b < fusion_bytes)
    return sum(1 for b in part_sizes if b >= fusion_bytes) + math.ceil(small / fusion_bytes)


@dataclass
class Job:
    workers: int            # processes pushing (a worker may reduce several GPUs first)
    shards: int
    hosts: int              # workers and shards spread evenly over them
    rate_bps: float         # each host's link, each way
    latency_s: float = 0.0  # one way, per link
    cores_per_host: float = 2.0  # for the data path (validation: the shared machine's cores)
    shared_cores: bool = False   # every host runs on the same cores (network namespaces)
    compression: str = "none"
    fusion_bytes: int = FUSION_BYTES
    part_bytes: int = PART_BYTES
    # GPU workers: the GPUs one worker reduces first (on the devices, NCCL over NVLink at
    # nvlink_bps bus bandwidth) and the bus its host copies cross (PCIe at pcie_bps, each way).
    gpus_per_worker: int = 0
    nvlink_bps: float = 150e9 * 8
    pcie_bps: float = 25e9 * 8


def shard_parts(parts, shards):
    """The parts each shard holds: largest first, each to the shard holding the fewest bytes
    (as trainer/kvstore/partition.cc balances them)."""
    held = [[] for _ in range(shards)]
    load = [0.0] * shards
    for b in sorted(parts, reverse=True):
        s = load.index(min(load))
        held[s].append(b)
        load[s] += b
    return held


def communication(elements, job, costs):
    """Seconds of one step's push+pull for every worker: (T_comm, T_link, T_cpu)."""
    r_push, r_pull = COMPRESSION[job.compression]
    parts = parts_of(elements, job.part_bytes)
    model_bytes = sum(parts)
    push, pull = model_bytes * r_push, model_bytes * r_pull
    W, S, H = job.workers, job.shards, job.hosts
    w_host, s_host = W / H, S / H  # per host
    local = min(1.0, s_host / S)  # the share of the bytes a worker's own host's shards hold
    out_bytes = w_host * push * (1 - local) + s_host * (pull / S) * (W - w_host)
    in_bytes = w_host * pull * (1 - local) + s_host * (push / S) * (W - w_host)
    t_link = max(out_bytes, in_bytes) * 8 / job.rate_bps if H > 1 else 0.0
    # Each end handles every byte and part it sends or receives, and each message once.
    worker_work, shard_work = 0.0, 0.0
    for held in shard_parts(parts, S):
        msgs = (messages([b * r_push for b in held], job.fusion_bytes) +
                messages([b * r_pull for b in held], job.fusion_bytes))
        work = (sum(held) * (r_push + r_pull) * costs.c_byte + 2 * len(held) * costs.c_part +
                msgs * costs.c_msg)
        worker_work += work
        shard_work += W * work
    host_work = w_host * worker_work + shard_work / H
    t_cpu = host_work / job.cores_per_host * (H if job.shared_cores else 1)
    # A GPU worker's gradients cross to the host and its values back (each worker's own bus),
    # after a ring reduce over its GPUs (2 (g-1)/g of the bytes), and are broadcast back.
    t_device = 0.0
    if job.gpus_per_worker > 0:
        g = job.gpus_per_worker
        t_device = max(model_bytes * 8 / job.pcie_bps,
                       2 * 2 * (g - 1) / g * model_bytes * 8 / job.nvlink_bps)
    t_comm = max(t_link, t_cpu, t_device) + costs.rtt + 2 * job.latency_s
    return t_comm, t_link, t_cpu


def training_step(elements, job, costs, compute_s):
    """(T_step, T_comm, efficiency) of a training step whose compute takes compute_s."""
    t_comm = (communication(elements, job, costs)[0]
              if job.workers > 1 or job.gpus_per_worker > 1 else 0.0)
    t_step = compute_s / 3 + max(2 * compute_s / 3, t_comm)
    return t_step, t_comm, compute_s / t_step


def costs_from_rounds(cores, big, small, unfused, rtt):
    """Costs from W2S2 rounds with every core busy (100 x 1 MiB; 1000 x 4 KiB fused and not)
    and a small tensor's round trip. Each byte, part and message is handled at 8 ends a round:
    each of the 2 workers' and each of the 2 shards', each way."""
    c_byte = cores * big / (8 * 100 * (1 << 20))
    fused_msgs = messages([4096] * 500, FUSION_BYTES)  # a worker's to one shard, each way
    rest_fused = cores * small / 8 - 1000 * 4096 * c_byte    # = 1000 c_part + 2 fused_msgs c_msg
    rest_unfused = cores * unfused / 8 - 1000 * 4096 * c_byte  # = 1000 c_part + 1000 c_msg
    c_msg = max(0.0, (rest_unfused - rest_fused) / (1000 - 2 * fused_msgs))
    c_part = max(0.0, (rest_fused - 2 * fused_msgs * c_msg) / 1000)
    costs = Costs(c_byte, c_part, c_msg, rtt)
    print(f"scaling_model: calibrated on {cores} cores: W2S2 rounds 100 x 1 MiB "
          f"{1e3 * big:.2f} ms, 1000 x 4 KiB {1e3 * small:.2f} ms fused and "
          f"{1e3 * unfused:.2f} ms not; 1 x 4 KiB {1e3 * rtt:.3f} ms -> c_byte "
          f"{costs.c_byte:.3g} s/B ({1 / costs.c_byte / 1e9:.2f} GB/s per core), c_part "
          f"{1e6 * costs.c_part:.2f} us, c_msg {1e6 * costs.c_msg:.2f} us, rtt "
          f"{1e3 * costs.rtt:.3f} ms", flush=True)
    print(json.dumps(costs.__dict__), flush=True)
    return costs


def calibrate():
    """Costs measured here: bench_ps jobs over mutual TLS on 127.0.0.1."""
    def median_round(workers, tensors, tensor_bytes, rounds, fusion=None):
        env = {} if fusion is None else {"COHORT_FUSION_BYTES": str(fusion)}
        results = run_job(workers, workers, tensors, tensor_bytes, 5, rounds, True, env)
        return max(r["median_ms"] for r in results) / 1e3

    return costs_from_rounds(os.cpu_count(), median_round(2, 100, 1 << 20, 10),
                             median_round(2, 1000, 4096, 50), median_round(2, 1000, 4096, 50, 0),
                             median_round(2, 1, 4096, 1000))


class ClusterJobs:
    """ps_worker jobs on the first n hosts of a netns cluster (ssh, mutual TLS)."""

    def __init__(self, cluster, root):
        from job_processes import kill_job  # noqa: E402
        self.cluster, self.root, self.kill_job, self.jobs = cluster, root, kill_job, 0

    def median_round(self, hosts, tensors, tensor_bytes, rounds, fusion=None):
        hosts_file = os.path.join(self.root, f"hosts{hosts}")
        with open(hosts_file, "w") as f:
            f.write("".join(f"{a} slots=1\n" for a in self.cluster.addresses[:hosts]))
        job_id = f"scaling-{os.getpid()}-{self.jobs}"
        self.jobs += 1
        command = self.cluster.in_launcher_ns([
            program("tools/launch/launch"), f"--job_id={job_id}", "-n", str(hosts), "-s",
            str(hosts), "-H", hosts_file, f"--ssh_identity={self.cluster.identity}",
            "--ssh_options=" + " ".join(self.cluster.ssh_args()[2:]),
            *([f"--env=COHORT_FUSION_BYTES={fusion}"] if fusion is not None else []), "--",
            program("tools/bench/ps_worker"), f"--tensors={tensors}",
            f"--tensor_bytes={tensor_bytes}", "--warmup=3", f"--rounds={rounds}"])
        try:
            job = subprocess.run(command, capture_output=True, text=True, timeout=900,
                                 cwd=self.root)
        finally:
            self.kill_job(job_id)
        medians = [float(line.split("median_ms ")[1].split()[0])
                   for line in job.stdout.splitlines() if "ps_worker: rank" in line]
        if job.returncode != 0 or len(medians) != hosts:
            sys.exit(f"scaling_model: error: job {job_id} failed:\n{job.stdout}{job.stderr}")
        return max(medians) / 1e3


def validate(rates, hosts, cases, fusion_bytes):
    """Costs calibrated on 2 hosts of a netns cluster (unshaped), then real ps_worker jobs on
    `hosts` hosts with every link shaped to each rate, against the model's prediction for the
    same job (its link rate what iperf3 carries each way over the shaped link, both ways
    busy)."""
    sys.path.insert(0, os.path.join(runfiles_root(), "tests"))
    sys.path.insert(0, os.path.join(runfiles_root(), "tools/launch"))
    from netns_cluster import Cluster  # noqa: E402

    root = tempfile.mkdtemp(prefix="scaling-model-")
    cluster = Cluster(root, hosts)
    rows = []
    try:
        cluster.start()
        jobs = ClusterJobs(cluster, root)
        costs = costs_from_rounds(os.cpu_count(), jobs.median_round(2, 100, 1 << 20, 10),
                                  jobs.median_round(2, 1000, 4096, 30),
                                  jobs.median_round(2, 1000, 4096, 30, fusion=0),
                                  jobs.median_round(2, 1, 4096, 300))
        for rate in rates:
            # A burst of 2 ms of the rate (at least tc's usual 256 KB) lets 10 Gbit/s be reached.
            burst_kb = max(256, int(bits_per_second(rate) / 8 * 0.002 / 1000))
            cluster.shape(rate, f"{burst_kb}kb")
            # What TCP carries each way over the shaped link while it carries as much back, as
            # a push+pull does, over as many connections as a host's link carries each way
            # (its worker's to the other shards, the other workers' to its shard): headers,
            # the other way's acknowledgements, the shaper's pace and the flows' contention
            # taken off.
            goodput_bps = 8e9 / 2 * iperf3_gbps(
                3, bidir=True, streams=2 * (hosts - 1), address=cluster.addresses[1],
                server_ns=["ip", "netns", "exec", cluster.hosts[1]],
                client_ns=["ip", "netns", "exec", cluster.hosts[0]])
            print(f"  {rate}: iperf3 --bidir carries {goodput_bps / 1e9:.2f} Gbit/s each way "
                  f"({100 * goodput_bps / bits_per_second(rate):.0f}% of the rate)", flush=True)
            for tensors, tensor_bytes in cases:
                measured = jobs.median_round(hosts, tensors, tensor_bytes, 15, fusion_bytes)
                j = Job(hosts, hosts, hosts, goodput_bps, cores_per_host=os.cpu_count(),
                        shared_cores=True, fusion_bytes=fusion_bytes)
                predicted, t_link, t_cpu = communication([tensor_bytes // 4] * tensors, j, costs)
                rows.append((rate, tensors, tensor_bytes, measured, predicted, t_link, t_cpu))
                print(f"  {rate:<7} {tensors:>5} x {tensor_bytes:>8} B: measured "
                      f"{1e3 * measured:8.2f} ms, predicted {1e3 * predicted:8.2f} ms (link "
                      f"{1e3 * t_link:.2f}, CPU {1e3 * t_cpu:.2f}), "
                      f"{100 * (predicted / measured - 1):+.1f}%", flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(f"W{hosts}S{hosts} on {hosts} hosts (costs from W2S2 on 2 of them, unshaped)")
    print()
    print("| link | tensors | measured round | predicted | of which link / CPU | error |")
    print("|---|---|---|---|---|---|")
    for rate, tensors, tensor_bytes, measured, predicted, t_link, t_cpu in rows:
        print(f"| {rate} | {tensors} × {tensor_bytes:,} B | {1e3 * measured:.2f} ms | "
              f"{1e3 * predicted:.2f} ms | {1e3 * t_link:.2f} / {1e3 * t_cpu:.2f} ms | "
              f"{100 * (predicted / measured - 1):+.1f}% |")
    return rows


def heartbeat_interval(members, timeout_s=None):
    """The scheduler's HeartbeatIntervalFor (services/scheduler/scheduler_core.cc), in s; with
    no timeout asked for, the automatic one's (heartbeat_timeout)."""
    most = min(timeout_s / 3 if timeout_s else math.inf, 5.0)
    return max(min(members / 500, most), min(0.25, most))


def heartbeat_timeout(members):
    """The scheduler's AutomaticHeartbeatTimeout, in s."""
    return max(HEARTBEAT_TIMEOUT_S, 3 * heartbeat_interval(members))


def control_plane(workers, shards, workers_per_host=1, costs=CONTROL_COSTS):
    """(heartbeat interval s, scheduler CPU share of a core, start s, barrier s, generation
    change heard s, heartbeat timeout s) at this size, with the automatic timeout."""
    members = workers + shards
    interval = heartbeat_interval(members)
    hosts = math.ceil(workers / workers_per_host)
    barrier = hosts * costs["c_barrier"] + (workers_per_host * costs["c_meet"]
                                             if workers_per_host > 1 else 0)
    return (interval, members / interval * costs["c_heartbeat"], members * costs["c_register"],
            barrier, members * costs["c_push"], heartbeat_timeout(members))


def project_control_plane(args):
    print()
    print("Control plane (scheduler; per job, off the step's path; upper bounds from a 2-core "
          "machine):")
    print()
    print("| GPUs | layout | workers | shards | heartbeat interval / timeout | scheduler CPU | "
          "start | barrier | generation change heard |")
    print("|---|---|---|---|---|---|---|---|---|")
    gpus = 8
    while gpus <= args.max_gpus:
        hosts = max(1, gpus // args.gpus_per_host)
        for workers, layout in ((gpus, "a worker per GPU"), (hosts, "a worker per host")):
            shards = hosts * args.shards_per_host
            interval, cpu, start, barrier, heard, timeout = control_plane(
                workers, shards, workers // hosts)
            print(f"| {gpus} | {layout} | {workers} | {shards} | {1e3 * interval:.0f} ms / "
                  f"{timeout:.1f} s | {100 * cpu:.1f}% of a core | {start:.2f} s | "
                  f"{1e3 * barrier:.1f} ms | {heard:.2f} s |")
        gpus *= 2


def project(args, costs):
    elements = model_elements(args.model)
    compute_s = args.batch_per_gpu / args.gpu_images_per_second
    model_mb = 4 * sum(elements) / 1e6
    print(f"scaling_model: {args.model} ({len(elements)} tensors, {model_mb:.1f} MB), "
          f"{args.gpu_images_per_second:g} img/s per GPU at batch {args.batch_per_gpu} "
          f"({1e3 * compute_s:.1f} ms a step), {args.gpus_per_host} GPUs per host, "
          f"{args.link} links, {args.latency_us:g} us latency, {args.cores_per_host:g} "
          f"data-path cores per host; costs c_byte {costs.c_byte:.3g} s/B, c_part "
          f"{1e6 * costs.c_part:.2f} us, c_msg {1e6 * costs.c_msg:.2f} us, rtt "
          f"{1e3 * costs.rtt:.3f} ms")
    print()
    print("| GPUs | hosts | layout | shards | compression | step | Comm% | img/s | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|")
    gpus = 1
    while gpus <= args.max_gpus:
        hosts = max(1, gpus // args.gpus_per_host)
        for per_gpu, layout in ((True, "a worker per GPU"), (False, "a worker per host")):
            if gpus == 1 and not per_gpu:
                continue
            workers = gpus if per_gpu else hosts
            for compression in args.compression.split(","):
                shards = hosts * args.shards_per_host
                job = Job(workers, shards, hosts, bits_per_second(args.link) * TCP_PAYLOAD,
                          args.latency_us * 1e-6, args.cores_per_host, False, compression,
                          args.fusion_bytes, args.part_bytes,
                          gpus_per_worker=1 if per_gpu else min(gpus, args.gpus_per_host))
                t_step, t_comm, eff = training_step(elements, job, costs, compute_s)
                comm = max(0.0, t_step - compute_s) / t_step
                print(f"| {gpus} | {hosts} | {layout} | {shards} | {compression} | "
                      f"{1e3 * t_step:.1f} ms | {100 * comm:.1f}% | "
                      f"{gpus * args.batch_per_gpu / t_step:,.0f} | {100 * eff:.1f}% |")
        gpus *= 2
    project_control_plane(args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", action="store_true",
                        help="measure c_byte, c_part and rtt here first (bench_ps jobs)")
    parser.add_argument("--costs", help="a JSON file of c_byte, c_part, rtt (else the defaults)")
    parser.add_argument("--validate", action="store_true",
                        help="root: run real jobs on shaped netns hosts against the model")
    parser.add_argument("--rates", default="1gbit,10gbit", help="--validate's link rates")
    parser.add_argument("--hosts", type=int, default=3, help="--validate's hosts")
    parser.add_argument("--small_only", action="store_true",
                        help="--validate only the 1000 x 4 KiB jobs")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--link", default="25gbit")
    parser.add_argument("--latency_us", type=float, default=10.0)
    parser.add_argument("--gpus_per_host", type=int, default=8)
    parser.add_argument("--max_gpus", type=int, default=256)
    parser.add_argument("--gpu_images_per_second", type=float, default=1000.0)
    parser.add_argument("--batch_per_gpu", type=int, default=128)
    parser.add_argument("--shards_per_host", type=int, default=1)
    parser.add_argument("--cores_per_host", type=float, default=16.0)
    parser.add_argument("--compression", default="none",
                        help="comma-separated: none, fp16, bf16, 2bit")
    parser.add_argument("--fusion_bytes", type=int, default=FUSION_BYTES,
                        help="the workers' (with --validate, the validated jobs')")
    parser.add_argument("--part_bytes", type=int, default=PART_BYTES)
    args = parser.parse_args()
    if args.costs:
        with open(args.costs) as f:
            costs = Costs(**json.load(f))
    else:
        costs = Costs(**DEFAULT_COSTS)
    if args.calibrate:
        costs = calibrate()
    if args.validate:
        if os.geteuid() != 0:
            sys.exit("scaling_model: --validate needs root (network namespaces, tc)")
        cases = [(25, 4_000_000), (100, 1 << 20), (1000, 4096)]
        if args.small_only:
            cases = cases[2:]
        validate(args.rates.split(","), args.hosts, cases, args.fusion_bytes)
        return
    if not args.calibrate:
        project(args, costs)


if __name__ == "__main__":
    main()
