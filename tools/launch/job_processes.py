"""Finds and stops the processes of one Cohort job by its marker, never by name.

The launcher gives every process it starts COHORT_JOB_ID=<job id> in its environment, so a
test can list a job's processes from /proc/<pid>/environ (tools/launch/job_env.h) and stop
them by PID, even after the launcher itself is gone.
"""

import os
import signal
import time


def environ_of(pid):
    """The environment of process pid ({} when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return {}
    return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)


def job_pids(job_id):
    """PIDs of the live processes whose environment holds COHORT_JOB_ID=<job_id> exactly.

    Processes that vanish while being read, or whose environment cannot be read (another
    user's, a zombie's), are left out."""
    marker = b"COHORT_JOB_ID=" + job_id.encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            pids.append(int(name))
    return sorted(pids)


def kill_job(job_id):
    """Sends SIGKILL to every process of the job; returns the PIDs it signalled."""
    pids = job_pids(job_id)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return pids


def wait_job_gone(job_id, timeout_s):
    """Waits up to timeout_s for the job's processes to end; returns those still there."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = job_pids(job_id)
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.05)
