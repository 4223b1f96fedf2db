#!/usr/bin/python3
"""The elastic soak: a 2-shard elastic job of counting workers (counting_worker_main.cc) for at
least --minutes, with the newest worker SIGKILLed every minute and a new one started 20 s later
(it joins the running job: the job runs with 2 workers, then 3 again, renumbering its steps
each time) and each shard SIGKILLed once (the launcher restarts it from its checkpoint). It
checks:
  - no lost update: every element ends at exactly the number of steps in the job's history,
    counted from the log (each roll back ends a stretch of steps at the checkpoint it went back
    to and starts the next at that checkpoint's step, renumbered for the new number of workers);
  - memory: the RSS of every process that lived through the warm-up stays within 10% of its
    RSS at the end of the warm-up;
  - no orphan: nothing of the job is left once the launcher exits.
It prints a report (markdown) and exits non-zero when a check fails.

  tools/soak/elastic_soak.sh [--minutes 10]
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

from soak_common import finish, run_job


def start_worker(job, work, worker, samples, number):
    """Starts a worker that joins the running job, as the launcher would start one."""
    with open(os.path.join(work, "job.log"), errors="replace") as f:
        scheduler = re.search(r"scheduler at (\S+) \(pid", f.read()).group(1)
    env = dict(os.environ, COHORT_SCHEDULER=scheduler, COHORT_INSECURE="1", COHORT_JOB_ID=job,
               COHORT_ROLE="worker", COHORT_RANK=str(number), OMP_NUM_THREADS="1")
    log = open(os.path.join(work, f"joiner-{number}.log"), "wb")
    return subprocess.Popen([worker, f"--samples={samples}", f"--result={work}/result"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd=work), log


def steps_in_history(log):
    """The steps the job's history holds: each roll back ends the stretch in progress at the
    checkpoint it went back to and starts the next at that step renumbered; the job ends at the
    final step."""
    events = re.finditer(r"every shard went back to step (\d+), step (\d+) for|"
                         r"every shard is back at step (\d+)|"
                         r"every element of every key is ([\d.]+) after step (\d+)", log)
    total, start, value = 0, 0, None
    for m in events:
        if m.group(1) is not None:
            total += int(m.group(1)) - start
            start = int(m.group(2))
        elif m.group(3) is not None:
            total += int(m.group(3)) - start
            start = int(m.group(3))
        else:
            total += int(m.group(5)) - start
            value = float(m.group(4))
    return total, value


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--launch", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--kill_every", type=float, default=60, help="seconds between worker kills")
    p.add_argument("--join_after", type=float, default=20,
                   help="seconds from a worker's kill to the start of a new one")
    p.add_argument("--warmup", type=float, default=60, help="seconds of a process's warm-up")
    p.add_argument("--samples", type=int, default=0, help="the workers' --samples (0: fit --minutes)")
    args = p.parse_args()

    work = tempfile.mkdtemp(prefix="cohort-soak-")
    job = f"soak-{os.getpid()}"
    # ~31 ms a step of 300 samples (3 workers) on 2 cores; the roll backs add more.
    samples = args.samples or int(args.minutes * 60 / 0.030 * 300 * 1.25)
    log_path = os.path.join(work, "job.log")
    command = [args.launch, f"--job_id={job}", "-n", "3", "-s", "2", "--on_worker_failure=elastic",
               "--min_workers=2", "--restart_failed_shards",
               f"--checkpoint_dir={work}/ckpt", "--checkpoint_every=50", "--checkpoint_keep=3",
               "--", args.worker, f"--samples={samples}", f"--result={work}/result"]
    # Seconds into the job: at a quarter and two thirds of it.
    shard_kills = {args.minutes * 15: "shard 1", args.minutes * 40: "shard 0"}
    next_worker_kill = args.kill_every  # seconds into the job
    kills = []
    joins = []  # when to start a new worker
    joiners = []  # (process, log)

    def tick(now, started, live):
        nonlocal next_worker_kill
        if joins and now >= joins[0]:
            joins.pop(0)
            joiners.append(start_worker(job, work, args.worker, samples, 3 + len(joiners)))
        if now - started >= next_worker_kill and now - started < args.minutes * 60:
            workers = sorted((int(n.split()[1]), pid) for pid, n in live.items()
                             if n.startswith("worker"))
            if workers:
                os.kill(workers[-1][1], signal.SIGKILL)
                kills.append((round(now - started), f"worker {workers[-1][0]}"))
                joins.append(now + args.join_after)
            next_worker_kill += args.kill_every
        for at, name in list(shard_kills.items()):
            if now - started >= at:
                del shard_kills[at]
                for pid, n in live.items():
                    if n == name:
                        os.kill(pid, signal.SIGKILL)
                        kills.append((round(now - started), name))

    def wait_for_joiners():
        for joiner, _ in joiners:
            if joiner.poll() is None:
                joiner.wait(timeout=30)

    run = run_job(command, work, job, log_path, tick, 2, before_gone=wait_for_joiners)
    joined_rcs = [j.returncode for j, _ in joiners]
    log = run.log
    steps, value = steps_in_history(log)
    failures = run.failures(args.minutes)
    # A joiner is killed (-9) or finishes (0).
    if any(r not in (0, -signal.SIGKILL) for r in joined_rcs):
        failures.append(f"the joining workers exited with {joined_rcs} (logs in {work})")
    if value is None or value != steps:
        failures.append(f"every element is {value}, the history holds {steps} steps")
    print(f"\n| | |\n|---|---|\n| job | {run.seconds / 60:.1f} min, launcher exit {run.rc} |")
    print(f"| kills (s into the job) | {', '.join(f'{n} at {t}' for t, n in kills)}; a new "
          f"worker {args.join_after:.0f} s after each worker's |")
    print(f"| generations | {len(re.findall(r'every shard went back to step', log))} roll backs "
          f"for a change of workers, {len(re.findall(r'every shard is back at step', log))} "
          f"for a restarted shard |")
    print(f"| no lost update | every element {value}; steps in the history {steps} |")
    print(f"| orphans | {len(run.orphans)} |")
    return finish(run.rss, args.warmup, failures)


if __name__ == "__main__":
    sys.exit(main())
