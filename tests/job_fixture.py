"""The fixture of the whole-job tests: a fresh folder and job id per test, processes started
with their output in <name>.log, members found by the job's marker (job_processes.py), and a
cleanup that kills whatever carries that marker, whatever happened."""

import glob
import os
import re
import subprocess
import tempfile
import time
import unittest

from job_processes import environ_of, job_pids, kill_job


PYTHON = "/usr/bin/python3"  # Debian's, with python3-numpy and python3-torch


def torch_missing():
    """Why the torch tests cannot run here (None: they can)."""
    r = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True)
    return None if r.returncode == 0 else "needs Debian's python3-torch (tools/install_deps.sh)"


def complete_steps(root, shards=2):
    """Steps of the checkpoints under root whose folder holds every shard's manifest."""
    steps = []
    for path in glob.glob(os.path.join(root, "v" + "[0-9]" * 12)):
        if all(os.path.exists(os.path.join(path, f"shard-{s}.manifest")) for s in range(shards)):
            steps.append(int(os.path.basename(path)[1:]))
    return sorted(steps)


class JobTestCase(unittest.TestCase):
    job_prefix = "jobtest"

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.job_id = f"{self.job_prefix}-{os.getpid()}-{self.id().rsplit('.', 1)[-1]}"
        self.procs = []
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        kill_job(self.job_id)

    def env(self, **extra):
        env = dict(os.environ, TMPDIR=self.dir, COHORT_JOB_ID=self.job_id)
        env.pop("OMP_NUM_THREADS", None)
        env.update(extra)
        return env

    def start(self, name, command):
        """Starts command in the test's folder, its output going to <name>.log."""
        log = open(os.path.join(self.dir, f"{name}.log"), "wb")
        p = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                             cwd=self.dir)
        self.procs.append(p)
        return p

    def make_job_tls(self, make_job_certs, tls, token_text, token=None):
        """The job's TLS folder (a CA and certificates for every role, by make_job_certs.sh) and
        its token file (its owner's only; default tls/../token); returns the token's path."""
        subprocess.run([make_job_certs, tls, "scheduler", "shard", "worker"], check=True,
                       capture_output=True, timeout=60)
        token = token or os.path.join(os.path.dirname(tls), "token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(token_text + "\n")
        return token

    def log(self, name):
        with open(os.path.join(self.dir, f"{name}.log"), errors="replace") as f:
            return f.read()

    def member_pid(self, role, rank=None):
        for pid in job_pids(self.job_id):
            env = environ_of(pid)
            if env.get("COHORT_ROLE") == role and (rank is None or env.get("COHORT_RANK") == str(rank)):
                return pid
        self.fail(f"no {role} {rank} among the job's processes {job_pids(self.job_id)}")

    def member(self, job, role, rank=None):
        """The PID of the job's `role` process (of `rank`)."""
        pids = [p for p in job_pids(job) if environ_of(p).get("COHORT_ROLE") == role and
                (rank is None or environ_of(p).get("COHORT_RANK") == str(rank))]
        self.assertEqual(len(pids), 1, (role, rank, job_pids(job)))
        return pids[0]

    def wait_for(self, name, launcher, pattern):
        """Waits until the log of `name` holds a line matching pattern."""
        deadline = time.monotonic() + 300
        while not re.search(pattern, self.log(name), re.M):
            self.assertLess(time.monotonic(), deadline, self.log(name))
            self.assertIsNone(launcher.poll(), self.log(name))
            time.sleep(0.005)
