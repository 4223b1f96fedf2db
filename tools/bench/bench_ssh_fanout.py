#!/usr/bin/python3
"""bench_ssh_fanout: the launcher's ssh fan-out to many hosts. H hosts in network namespaces,
each with its own sshd, host name and sync folder (tests/netns_cluster.py); the real launcher
copies the job's files and programs to every host (--sync_dst_dir), starts a scheduler, S
shards and a LeNet worker on every host over ssh with mutual TLS, and the job trains one short
epoch. Timed from the launcher's start: the copy, every worker up, the job training, DONE, the
launcher's exit, and the moment no process of the job is left on any host. A second job is
interrupted (SIGINT, a terminal's Ctrl-C) once every worker is up: the time until the launcher
exits and until nothing of the job is left anywhere. Needs root.

  bazel run //tools/bench:bench_ssh_fanout -- --hosts 32 --shards 4
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ps import program, runfiles_root  # noqa: E402

sys.path.insert(0, os.path.join(runfiles_root(), "tests"))
sys.path.insert(0, os.path.join(runfiles_root(), "tools/launch"))
from job_processes import job_pids, kill_job, wait_job_gone  # noqa: E402
from netns_cluster import Cluster  # noqa: E402


class Job:
    """One launcher run; its output in a file, read as it grows, with the time of each line."""

    def __init__(self, cluster, root, job_id, hosts, shards):
        self.job_id = job_id
        self.hosts = hosts
        self.output = os.path.join(root, f"{job_id}.txt")
        self.lines = []  # (seconds since the start, line)
        self._seen = 0
        hosts_file = os.path.join(root, "hosts")
        with open(hosts_file, "w") as f:
            f.write("".join(f"{address} slots=1\n" for address in cluster.addresses[:hosts]))
        command = cluster.in_launcher_ns([
            program("tools/launch/launch"), f"--job_id={job_id}",
            "-n", str(hosts), "-s", str(shards), "-H", hosts_file,
            f"--ssh_identity={cluster.identity}",
            "--ssh_options=" + " ".join(cluster.ssh_args()[2:]),
            f"--sync_dst_dir={cluster.sync_dir}", "--env=OMP_NUM_THREADS=1", "--",
            "--model=lenet", "--dataset=synthetic:1x28x28:10", f"--train_samples={64 * hosts}",
            "--epochs=1", "--batch_size=16", "--output="])
        self.start = time.monotonic()
        self.out = open(self.output, "wb")
        self.process = subprocess.Popen(command, stdout=self.out, stderr=subprocess.STDOUT,
                                        cwd=root)

    def read(self):
        with open(self.output, errors="replace") as f:
            f.seek(self._seen)
            text = f.read()
        complete = text[:text.rfind("\n") + 1]
        self._seen += len(complete.encode())
        now = time.monotonic() - self.start
        self.lines += [(now, line) for line in complete.splitlines()]

    def when(self, pattern, count=1, timeout=600):
        """Seconds from the start to the count-th line matching pattern (polling)."""
        deadline = time.monotonic() + timeout
        while True:
            self.read()
            hits = [t for t, line in self.lines if re.search(pattern, line)]
            if len(hits) >= count:
                return hits[count - 1]
            if time.monotonic() > deadline or (self.process.poll() is not None and
                                               self._drained()):
                sys.exit(f"bench_ssh_fanout: no {count} lines matching {pattern!r}:\n"
                         + "\n".join(line for _, line in self.lines[-40:]))
            time.sleep(0.02)

    def _drained(self):
        before = len(self.lines)
        self.read()
        return len(self.lines) == before

    def gone(self):
        """Seconds from the start until no process of the job is left on any host."""
        left = wait_job_gone(self.job_id, 60)
        if left:
            sys.exit(f"bench_ssh_fanout: job {self.job_id} left processes {left}")
        return time.monotonic() - self.start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_ssh_fanout: needs root (network namespaces)")
    root = tempfile.mkdtemp(prefix="bench-fanout-")
    cluster = Cluster(root, args.hosts)
    worker_up = r"^\[\S+ worker \d+\] worker \d+: metrics on"
    try:
        t = time.monotonic()
        cluster.start()
        print(f"bench_ssh_fanout: {args.hosts} hosts (sshd each) up in "
              f"{time.monotonic() - t:.1f} s; {os.cpu_count()} CPUs shared by all", flush=True)

        job = Job(cluster, root, f"fanout-{os.getpid()}-done", args.hosts, args.shards)
        copied = job.when(r"^launch: job \S+: scheduler at")
        up = job.when(worker_up, count=args.hosts)
        training = job.when(r"worker 0\] train: lenet on")
        done = job.when(r"scheduler: job DONE")
        code = job.process.wait(timeout=600)
        exited = time.monotonic() - job.start
        if code != 0:
            sys.exit(f"bench_ssh_fanout: the job failed ({code}):\n{open(job.output).read()}")
        gone = job.gone()
        left = [d for d in os.listdir("/tmp") if d.startswith(f"cohort-{job.job_id}")]
        print(f"  a job to its end: copied to every host {copied:.2f} s, every worker up "
              f"{up:.2f} s, training {training:.2f} s, DONE {done:.2f} s, launcher exited "
              f"{exited:.2f} s, nothing left on any host {gone:.2f} s"
              f"{'' if not left else f'; run folders left: {left}'}", flush=True)

        job = Job(cluster, root, f"fanout-{os.getpid()}-stopped", args.hosts, args.shards)
        up = job.when(worker_up, count=args.hosts)
        members = len(job_pids(job.job_id))
        job.process.send_signal(signal.SIGINT)
        stopped = time.monotonic() - job.start
        job.process.wait(timeout=120)
        exited = time.monotonic() - job.start - stopped
        gone = job.gone() - stopped
        left = [d for d in os.listdir("/tmp") if d.startswith(f"cohort-{job.job_id}")]
        print(f"  a job interrupted (SIGINT) once every worker was up ({up:.2f} s, "
              f"{members} processes of the job on the hosts): launcher exited {exited:.2f} s "
              f"later, nothing left on any host {gone:.2f} s later"
              f"{'' if not left else f'; run folders left: {left}'}", flush=True)
    finally:
        for job_id in (f"fanout-{os.getpid()}-done", f"fanout-{os.getpid()}-stopped"):
            kill_job(job_id)
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
