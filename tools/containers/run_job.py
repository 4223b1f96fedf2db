#!/usr/bin/python3
"""Runs the one-machine container job (deploy/containers/job.yaml) under `podman kube play`:
starts it, says how long the first training step took to come, waits for the workers, prints
worker 0's results and the scheduler's verdict, and takes the pod down. It leaves two volumes,
both named when it ends: cohort-model (the model) and cohort-prometheus (Prometheus's data);
--remove_volumes removes them.

    tools/containers/build_images.sh        # once: the images
    tools/containers/run_job.py [--model M] [--epochs N] [--repeat N] [--remove_volumes]

--model and --epochs change the workers' flags of job.yaml (LeNet, 3 epochs); the job's size
(2 shards, 2 workers) is job.yaml's: one container a member.

--repeat N runs the job N times and prints the seconds from `podman kube play` to the first
training step (worker 0's cohort_worker_steps_total >= 1) as min/median/max, the figure in
docs/benchmarks.md. Needs root and podman (tools/install_deps.sh). Exit status 0 when every run
ended DONE.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = os.path.join(ROOT, "deploy/containers/job.yaml")
POD = "cohort-job"
WORKER0_METRICS = 7201


def podman_env():
    """The environment tools/containers/podman_env.sh sets up (it writes podman's config)."""
    out = subprocess.run(["bash", "-c", "source tools/containers/podman_env.sh && env -0"],
                         cwd=ROOT, capture_output=True, check=True).stdout
    return dict(e.split("=", 1) for e in out.decode().split("\0") if "=" in e)


ENV = podman_env()


def podman(*args, check=True, timeout=600):
    r = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        sys.exit(f"run_job: podman {' '.join(args)} failed: {r.stderr.strip()}")
    return r


def steps_done():
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{WORKER0_METRICS}/metrics",
                                    timeout=1) as r:
            page = r.read().decode()
    except OSError:
        return 0
    m = re.search(r"^cohort_worker_steps_total(?:{[^}]*})? ([\d.e+]+)$", page, re.M)
    return float(m.group(1)) if m else 0


def job_manifest(model, epochs):
    """job.yaml with the workers' --model and --epochs replaced (those given), as a file."""
    with open(JOB) as f:
        original = text = f.read()
    if model:
        text = re.sub(r"--model=[\w-]+", f"--model={model}", text)
    if epochs:
        text = re.sub(r"--epochs=\d+", f"--epochs={epochs}", text)
    if text == original:
        return JOB
    path = os.path.join(tempfile.mkdtemp(prefix="cohort-run-job-"), "job.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def run_once(remove_volumes, manifest):
    for role in ("scheduler", "shard", "worker", "prometheus"):
        if podman("image", "exists", f"localhost/cohort-{role}:latest", check=False).returncode:
            sys.exit(f"run_job: no image localhost/cohort-{role}:latest: run "
                     "tools/containers/build_images.sh first")
    start = time.monotonic()
    podman("kube", "play", manifest)
    try:
        first_step = None
        while first_step is None and time.monotonic() - start < 120:
            if steps_done() >= 1:
                first_step = time.monotonic() - start
            time.sleep(0.05)
        print(f"run_job: first training step {first_step:.2f} s after podman kube play"
              if first_step is not None else "run_job: no training step within 120 s",
              flush=True)
        for worker in ("worker-0", "worker-1"):
            podman("wait", f"{POD}-{worker}")
        podman("wait", f"{POD}-scheduler")
        logs = podman("logs", f"{POD}-worker-0")
        for line in (logs.stdout + logs.stderr).splitlines():
            if re.match(r"(Epoch \d+:|Test top-1|Wrote )", line):
                print(f"[worker 0] {line}")
        verdict = re.findall(r"scheduler: job (?:DONE|FAILED).*", podman(
            "logs", f"{POD}-scheduler").stdout)
        print(verdict[-1] if verdict else "scheduler: no verdict", flush=True)
    finally:
        podman("kube", "down", manifest, check=False)
    volumes = ("cohort-model", "cohort-prometheus")
    if remove_volumes:
        podman("volume", "rm", "--force", *volumes, check=False)
        print(f"run_job: removed the volumes {' and '.join(volumes)}")
    else:
        where = {v: podman("volume", "inspect", v, "--format", "{{.Mountpoint}}",
                           check=False).stdout.strip() for v in volumes}
        print(f"run_job: left the volumes cohort-model (the model: "
              f"{where['cohort-model']}/model.safetensors) and cohort-prometheus (Prometheus's "
              f"data, {where['cohort-prometheus']}); --remove_volumes removes them, or podman "
              f"volume rm {' '.join(volumes)}")
    return first_step, bool(verdict) and "DONE" in verdict[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--model", help="the workers' --model (job.yaml's: lenet)")
    parser.add_argument("--epochs", type=int, help="the workers' --epochs (job.yaml's: 3)")
    parser.add_argument("--remove_volumes", action="store_true",
                        help="remove the volumes (the model among them) after each run")
    args = parser.parse_args()
    times, ok = [], True
    manifest = job_manifest(args.model, args.epochs)
    for _ in range(args.repeat):
        first_step, done = run_once(args.remove_volumes, manifest)
        ok = ok and done
        if first_step is not None:
            times.append(first_step)
    if args.repeat > 1 and times:
        print(f"run_job: first training step after {len(times)} runs: min {min(times):.2f} s, "
              f"median {statistics.median(times):.2f} s, max {max(times):.2f} s")
    return 0 if ok and len(times) == args.repeat else 1


if __name__ == "__main__":
    sys.exit(main())
