#!/usr/bin/python3
"""Cohort on Slurm: deploy/slurm/cohort.sbatch on a real one-node Slurm cluster (Debian's
slurm-wlm and munge, started by the test in a folder of its own; tests/slurm_cluster.py).

- a LeNet job (2 shards + 2 workers as 4 srun tasks, the scheduler in the batch script, mutual
  TLS and a token made for the job) trains into the local job's accuracy band and leaves nothing
  in its folder but its output and the model (the job's key and token are gone);
- scancel mid-job: it reads as cancelled, and every process of the job is gone soon after;
- a Python program as the workers (`-- python3 numpy_kvstore.py`): it joins from the COHORT_*
  variables the script sets (TLS included) and learns, both ranks holding the same weights; one
  that raises fails the job naming its rank and the exception.

Needs root and slurm-wlm + munge; skipped with a message otherwise.
Usage: slurm_test.py SBATCH_SCRIPT JOB_PROCESSES_PY SCHEDULER SHARD WORKER COHORT_INIT_PY
       NUMPY_EXAMPLE FAILING_PROGRAM
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SBATCH, JOB_PROCESSES = (os.path.abspath(p) for p in sys.argv[1:3])
BINARIES = [os.path.abspath(p) for p in sys.argv[3:6]]
COHORT_INIT, NUMPY_EXAMPLE, FAILING_PROGRAM = (os.path.abspath(p) for p in sys.argv[6:9])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job_processes import job_pids, kill_job  # noqa: E402
from slurm_cluster import SlurmCluster, why_not  # noqa: E402

# The checkout's root in the runfiles: the sbatch script finds tools/make_job_certs.sh there.
HOME = os.path.dirname(os.path.dirname(os.path.dirname(SBATCH)))


@unittest.skipIf(why_not(), why_not())
class SlurmTest(unittest.TestCase):
    nodes = 1

    @classmethod
    def setUpClass(cls):
        # A short path: munged's socket lives in it.
        cls.dir = tempfile.mkdtemp(prefix="cohort-slurm-", dir="/var/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
        cls.slurm = SlurmCluster(os.path.join(cls.dir, "slurm"), cls.nodes)
        os.mkdir(cls.slurm.dir)
        cls.addClassCleanup(cls.slurm.stop)
        cls.slurm.start()
        cls.bin = os.path.join(cls.dir, "bin")
        os.mkdir(cls.bin)
        for path in BINARIES:
            os.symlink(path, os.path.join(cls.bin, os.path.basename(path)))
        cls.env = dict(cls.slurm.env, COHORT_HOME=HOME, COHORT_BIN=cls.bin)

    def submit(self, name, *worker_flags, program=None, env=None):
        """A job of 2 shards and 2 workers: the C++ worker training LeNet with worker_flags, or
        `program` (a command)."""
        work = os.path.join(self.dir, name)
        os.mkdir(work)
        output = os.path.join(work, "out.txt")
        workers = program or ["--model=lenet", "--dataset=fashion-mnist", *worker_flags]
        r = subprocess.run(
            ["sbatch", "--parsable", "--ntasks=4", f"--nodes={self.nodes}", f"--chdir={work}",
             f"--output={output}", SBATCH, "--shards", "2", "--", *workers],
            env=dict(self.env, **(env or {})), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = r.stdout.strip().split(";")[0]
        self.addCleanup(kill_job, f"slurm-{job}")
        return job, output

    def wait_gone(self, job, timeout):
        """Waits until Slurm no longer lists the job; True if it went in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            q = subprocess.run(["squeue", "--noheader", f"--jobs={job}"], env=self.env,
                               capture_output=True, text=True)
            if q.returncode == 0 and not q.stdout.strip():
                return True
            time.sleep(0.5)
        return False

    def read(self, output):
        try:
            with open(output, errors="replace") as f:
                return f.read()
        except FileNotFoundError:  # the job has not started
            return ""

    def test_lenet_job_trains_into_the_band(self):
        job, output = self.submit("band", "--epochs=1")
        self.assertTrue(self.wait_gone(job, 300), self.read(output) + self.slurm.logs())
        out = self.read(output)
        self.assertIn("job DONE: all 2 workers finished", out)
        self.assertRegex(out, r"(?m)^\[shard\] 0: shard 0 of job slurm-\d+", "task 0 is shard 0")
        self.assertIn("[worker] 1: train: rank 1 of 2", out)
        top1 = float(re.search(r"^\[worker\] 0: Test top-1 ([\d.]+)%", out, re.M).group(1))
        self.assertGreaterEqual(top1, 80.0, out)  # the local job's band (tests/job_test.py)
        self.assertIn("(with the job's token)", out)  # TLS and a token, made for the job
        self.assertEqual(job_pids(f"slurm-{job}"), [], "processes of the job left")
        # Its folder keeps the output and the model, this job's own; the run folder with the
        # CA's key and the token went with the job.
        self.assertEqual(sorted(os.listdir(os.path.dirname(output))),
                         [f"model-{job}.safetensors", "out.txt"])

    def test_a_python_program_runs_as_the_workers(self):
        python = {"PYTHONPATH": os.path.dirname(os.path.dirname(COHORT_INIT))}
        job, output = self.submit("python", program=["/usr/bin/python3", NUMPY_EXAMPLE],
                                  env=python)
        self.assertTrue(self.wait_gone(job, 300), self.read(output) + self.slurm.logs())
        out = self.read(output)
        self.assertIn("job DONE: all 2 workers finished", out)
        weights = re.findall(r"(?m)^\[worker\] \d: rank \d of 2: last batch loss .* w\[1\] (\S+)$",
                             out)
        self.assertEqual(len(weights), 2, out)
        self.assertEqual(weights[0], weights[1], out)
        self.assertIn("(with the job's token)", out)  # TLS and the token, from the variables
        self.assertEqual(job_pids(f"slurm-{job}"), [], "processes of the job left")

        job, output = self.submit("python-raises", env=python,
                                  program=["/usr/bin/python3", FAILING_PROGRAM, "--raise_at=5"])
        self.assertTrue(self.wait_gone(job, 300), self.read(output) + self.slurm.logs())
        self.assertRegex(self.read(output), r"job FAILED: worker 1 \(host [^,]+, pid \d+\) "
                                            r"failed: the program exited with status 1: "
                                            r"ValueError: boom at step 5")
        self.assertEqual(job_pids(f"slurm-{job}"), [], "processes of the job left")

    def test_scancel_mid_job_leaves_no_process(self):
        job, output = self.submit("cancel", "--epochs=50")
        deadline = time.monotonic() + 120
        while "Step  Epoch" not in self.read(output) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertIn("Step  Epoch", self.read(output), self.slurm.logs())
        self.assertGreater(len(job_pids(f"slurm-{job}")), 4)  # scheduler, shards, workers
        subprocess.run(["scancel", job], env=self.env, check=True)
        self.assertTrue(self.wait_gone(job, 60), self.slurm.logs())
        deadline = time.monotonic() + 10
        while job_pids(f"slurm-{job}") and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(job_pids(f"slurm-{job}"), [], self.read(output))
        self.assertIn(f"job slurm-{job} cancelled (scancel, or the time limit)", self.read(output))
        self.assertEqual(sorted(os.listdir(os.path.dirname(output))), ["out.txt"])


@unittest.skipIf(why_not(), why_not())
class SlurmTwoNodesTest(SlurmTest):
    """The same job on two Slurm nodes of this one machine (a slurmd each)."""
    nodes = 2

    def test_the_shards_are_spread_over_the_nodes(self):
        job, output = self.submit("spread", "--epochs=1")
        self.assertTrue(self.wait_gone(job, 300), self.read(output) + self.slurm.logs())
        out = self.read(output)
        self.assertIn("job DONE: all 2 workers finished", out)
        shard_nodes = dict(re.findall(r"(?m)^\[shard\] (\d): on node (\S+)$", out))
        self.assertEqual(sorted(shard_nodes.values()), ["n1", "n2"], out)

    # The one-node cases run once, above.
    test_lenet_job_trains_into_the_band = None
    test_scancel_mid_job_leaves_no_process = None
    test_a_python_program_runs_as_the_workers = None


if __name__ == "__main__":
    unittest.main()
