"""What the soaks share: the run of the job (its processes, through job_processes.py's helpers),
their memory over time, the checks every soak makes, and the memory check."""

import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch"))
from job_processes import environ_of, job_pids, kill_job, wait_job_gone  # noqa: E402,F401


class SoakRun:
    """What run_job saw: seconds the job ran, the launcher's exit status, the processes of the
    job left after it, every member's memory over time (sample_rss) and the job's log."""

    def __init__(self, seconds, rc, orphans, rss, log):
        self.seconds, self.rc, self.orphans, self.rss, self.log = seconds, rc, orphans, rss, log

    def failures(self, minutes):
        """The checks of every soak: the launcher ended well, after at least `minutes`, and
        left nothing behind."""
        failures = []
        if self.rc != 0:
            failures.append(f"the launcher exited with {self.rc}")
        if self.seconds < minutes * 60:
            failures.append(f"the job ran {self.seconds:.0f} s, less than {minutes} minutes")
        if self.orphans:
            failures.append(f"processes left: {self.orphans}")
        return failures


def run_job(command, work, job, log_path, tick, interval, role_of=None, before_gone=None):
    """Runs the launcher's command in work (its output to log_path) until it exits; every
    `interval` seconds calls tick(now, started, live) with live = members(job), then samples
    each member's memory (with role_of(live, pid) as its role). Then calls before_gone() and waits
    up to 10 s for the job's processes to go. Whatever happens, nothing of the job is left."""
    print(f"soak: {' '.join(command)}\nsoak: log in {log_path}", flush=True)
    with open(log_path, "wb") as log:
        launcher = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    started = time.monotonic()
    rss = {}  # pid -> (name, first seen, [(t, KiB, role)])
    try:
        while launcher.poll() is None:
            now = time.monotonic()
            live = members(job)
            tick(now, started, live)
            sample_rss(rss, live, now, lambda pid: role_of(live, pid) if role_of else None)
            time.sleep(interval)
        seconds = time.monotonic() - started
        if before_gone:
            before_gone()
        orphans = wait_job_gone(job, 10)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        kill_job(job)
    with open(log_path, errors="replace") as f:
        return SoakRun(seconds, launcher.returncode, orphans, rss, f.read())


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def members(job):
    """{pid: "role rank"} of the job's scheduler, shards and workers."""
    out = {}
    for pid in job_pids(job):
        env = environ_of(pid)
        role = env.get("COHORT_ROLE")
        if role in ("scheduler", "shard", "worker"):
            out[pid] = f"{role} {env.get('COHORT_RANK', '')}".strip()
    return out


def sample_rss(rss, live, now, role_of=lambda pid: None):
    """Adds each live member's RSS now, with its role, to rss ({pid: (name, first seen,
    [(t, KiB, role)])}). A process's memory is compared only within one role: a shard that leads
    another share holds the workers' streams (and rings) for it, a step that is not a leak."""
    for pid, name in live.items():
        kib = rss_kib(pid)
        if kib is not None:
            rss.setdefault(pid, (name, now, []))[2].append((now, kib, role_of(pid)))


def finish(rss, warmup, failures):
    """Reports memory (report_rss), then the verdict; the soak's exit status."""
    report_rss(rss, warmup, failures)
    print("\nsoak: " + ("PASSED" if not failures else "FAILED: " + "; ".join(failures)))
    return 0 if not failures else 1


def report_rss(rss, warmup, failures, settle=10):
    """Prints, for every process that lived past its warm-up and 2 minutes more, its RSS at the
    end of the warm-up and the most after, each in the same role; a growth past 10% is a
    failure. A role's first samples (its first `settle` seconds, or the process's warm-up) are
    its warm-up; its baseline is the median of the 10 s after."""
    print("\n| process | lived (min) | role | RSS at warm-up end (MiB) | max after (MiB) | growth |")
    print("|---|---|---|---|---|---|")
    for pid, (name, first, samples) in sorted(rss.items(), key=lambda x: x[1][0]):
        lived = samples[-1][0] - first
        if lived < warmup + 120:
            continue
        for role, settled in settled_by_role(samples, first + warmup, settle).items():
            warm = [k for t, k in settled if t < settled[0][0] + 10]
            after = [k for t, k in settled if t >= settled[0][0] + 10]
            if not after:
                continue
            base = statistics.median(warm)
            growth = max(after) / base - 1
            flag = "" if growth <= 0.10 else " (over 10%)"
            if growth > 0.10:
                failures.append(f"{name} (pid {pid}, {role or 'its role'}) RSS grew {growth:.1%}")
            print(f"| {name} (pid {pid}) | {lived / 60:.1f} | {role or ''} | {base / 1024:.1f} | "
                  f"{max(after) / 1024:.1f} | {growth:+.1%}{flag} |")


def settled_by_role(samples, warm_from, settle):
    """{role: [(t, KiB)]}: the samples from warm_from on, less each role's first `settle`
    seconds every time the process takes it on."""
    out = {}
    role, since = object(), None
    for t, kib, r in samples:
        if r != role:
            role, since = r, t
        if t >= warm_from and t >= since + settle:
            out.setdefault(r, []).append((t, kib))
    return out
