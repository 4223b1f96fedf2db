#!/usr/bin/python3
"""The replication soak: a job of 2 counting workers (counting_worker_main.cc) on 3 replicated
shards (--shard_replicas=2 --restart_failed_shards, checkpoints beside) for at least --minutes,
with a shard chosen at random SIGKILLed every --kill_every seconds; each time its backups lead
its shares, the launcher restarts it and it backs up the shares left without a backup, copied
from their leaders. It checks:
  - no lost step and no roll back: the job's history is one stretch, so every element ends at
    exactly the number of steps in the job (each worker also checks that every step adds 1),
    and no roll back is logged;
  - every kill was taken over: one hand-over a kill in the scheduler's log;
  - memory: the RSS of every process that lived through the warm-up stays within 10% of its
    RSS at the end of the warm-up in the same role: a shard's role is the shares it leads and
    backs up (read from the log as the job runs), since leading a share adds the workers'
    streams for it (with a pair of shared-memory rings each), a step, not a leak;
  - no orphan: nothing of the job is left once the launcher exits.
It prints a report (markdown) and exits non-zero when a check fails.

  tools/soak/replication_soak.sh [--minutes 10]
"""

import argparse
import os
import random
import re
import signal
import sys
import tempfile

from soak_common import finish, run_job

SHARDS = 3
DIED = re.compile(r"scheduler: warning: shard (\d+) \(host .*\) died \(.*\): (.*)")
LEADS = re.compile(r"shard (\d+) \(host [^)]*\) leads share (\d+)")
BACKS = re.compile(r"^\[shard (\d+)\] shard \d+: backs up share (\d+) ")
ROLL_BACK = r"rolling back|rolled back|back to step|every shard is back at step"


class ShareRoles:
    """What each shard rank leads and backs up, followed in the job's log as it grows: at first
    shard r leads share r (its backup is the next shard's first share), a dead shard's shares
    go to the ranks the scheduler names, and a shard that comes back leads nothing and backs up
    what it says it copied."""

    def __init__(self, log_path):
        self.log_path, self.offset, self.rest = log_path, 0, b""
        self.leads = {r: {r} for r in range(SHARDS)}
        self.backs = {r: {(r - 1) % SHARDS} for r in range(SHARDS)}

    def follow(self):
        with open(self.log_path, "rb") as f:
            f.seek(self.offset)
            data = self.rest + f.read()
            self.offset = f.tell()
        *lines, self.rest = data.split(b"\n")
        for line in lines:
            self.read(line.decode(errors="replace"))

    def read(self, line):
        died = DIED.search(line)
        if died:
            dead = int(died.group(1))
            self.leads[dead], self.backs[dead] = set(), set()
            for rank, share in LEADS.findall(died.group(2)):
                self.leads[int(rank)].add(int(share))
                self.backs[int(rank)].discard(int(share))
        backs = BACKS.search(line)
        if backs:
            self.backs[int(backs.group(1))].add(int(backs.group(2)))

    def role(self, name):
        if not name.startswith("shard "):
            return None
        rank = int(name.split()[1])
        return (f"leads {','.join(map(str, sorted(self.leads[rank]))) or '-'}; "
                f"backs up {','.join(map(str, sorted(self.backs[rank]))) or '-'}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--launch", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--kill_every", type=float, default=30, help="seconds between shard kills")
    p.add_argument("--warmup", type=float, default=60, help="seconds of a process's warm-up")
    p.add_argument("--samples", type=int, default=0, help="the workers' --samples (0: fit --minutes)")
    p.add_argument("--seed", type=int, default=0, help="which shards die (0: a new choice)")
    args = p.parse_args()

    seed = args.seed or random.SystemRandom().randrange(1, 1 << 30)
    chooser = random.Random(seed)
    work = tempfile.mkdtemp(prefix="cohort-replication-soak-")
    job = f"replication-soak-{os.getpid()}"
    # ~27 ms a step of 200 samples (2 workers) on 2 cores.
    samples = args.samples or int(args.minutes * 60 / 0.027 * 200 * 1.2)
    log_path = os.path.join(work, "job.log")
    kills_planned = int(args.minutes * 60 / args.kill_every)
    command = [args.launch, f"--job_id={job}", "-n", "2", "-s", str(SHARDS), "--shard_replicas=2",
               "--restart_failed_shards", f"--max_shard_restarts={kills_planned + 1}",
               f"--checkpoint_dir={work}/ckpt", "--checkpoint_every=1000", "--checkpoint_keep=2",
               "--", args.worker, f"--samples={samples}", f"--result={work}/result"]
    print(f"soak: seed {seed}", flush=True)
    next_kill = args.kill_every  # seconds into the job
    roles = ShareRoles(log_path)
    kills = []

    def tick(now, started, live):
        nonlocal next_kill
        roles.follow()
        if now - started >= next_kill and now - started < args.minutes * 60:
            shards = sorted((n, pid) for pid, n in live.items() if n.startswith("shard"))
            if shards:
                name, pid = chooser.choice(shards)
                os.kill(pid, signal.SIGKILL)
                kills.append((round(now - started), name))
            next_kill += args.kill_every

    run = run_job(command, work, job, log_path, tick, 1,
                  role_of=lambda live, pid: roles.role(live[pid]))
    log = run.log
    final = re.search(r"every element of every key is ([\d.]+) after step (\d+)", log)
    value, steps = (float(final.group(1)), int(final.group(2))) if final else (None, None)
    handed = len(re.findall(r"scheduler: warning: shard \d+ \(host .*\) died \(.*\): ", log))
    copies = re.findall(r"shard \d+: backs up share \d+ \(\d+ parts?\) led by shard \d+ at \S+, "
                        r"copied in (\d+) ms", log)
    roll_backs = len(re.findall(ROLL_BACK, log))
    failures = run.failures(args.minutes)
    if value is None or value != steps:
        failures.append(f"every element is {value}, the job has {steps} steps")
    if roll_backs:
        failures.append(f"{roll_backs} roll backs logged")
    if handed != len(kills):
        failures.append(f"{len(kills)} shards killed, {handed} hand-overs logged")
    copy_ms = sorted(int(c) for c in copies)
    print(f"\n| | |\n|---|---|\n| job | {run.seconds / 60:.1f} min, launcher exit {run.rc} |")
    print(f"| kills (s into the job) | {', '.join(f'{n} at {t}' for t, n in kills)} |")
    print(f"| hand-overs | {handed}; {len(copies)} shares copied to a restarted shard"
          + (f" in {copy_ms[0]}-{copy_ms[-1]} ms" if copy_ms else "") + " |")
    print(f"| roll backs | {roll_backs} |")
    print(f"| no lost step | every element {value}; steps in the job {steps} |")
    print(f"| orphans | {len(run.orphans)} |")
    return finish(run.rss, args.warmup, failures)


if __name__ == "__main__":
    sys.exit(main())
