"""Runs //tools:launch against the shell stand-ins in testdata/ (shared by the launcher tests).

Arguments (from the BUILD rule): the launch binary, the fake scheduler, shard and worker, and
the user program. Every test gets a fresh FAKE_DIR, where the fakes meet, and a unique job id;
whatever happens, cleanup kills the launcher and every process carrying the job's marker.
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest

from job_processes import job_pids, kill_job

LAUNCH, FAKE_SCHEDULER, FAKE_SHARD, FAKE_WORKER, USER_PROG = (
    os.path.abspath(p) for p in sys.argv[1:6])


class LaunchTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.fake_dir = os.path.join(self.dir, "fake")
        os.mkdir(self.fake_dir)
        self.job_id = f"launchtest-{os.getpid()}-{self.id().rsplit('.', 1)[-1]}"
        self.output_path = os.path.join(self.dir, "output.txt")
        self.launcher = None
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        if self.launcher is not None and self.launcher.poll() is None:
            self.launcher.kill()
            self.launcher.wait()
        kill_job(self.job_id)

    def start(self, *args, worker=(), env=None, fakes=True):
        """Starts the launcher with `args` before `--` and `worker` after it."""
        # TMPDIR: the launcher's scratch folder (left behind only when the launcher is killed).
        full_env = dict(os.environ, FAKE_DIR=self.fake_dir, TMPDIR=self.dir)
        full_env.pop("OMP_NUM_THREADS", None)
        full_env.pop("OMP_WAIT_POLICY", None)
        full_env.update(env or {})
        command = [LAUNCH, f"--job-id={self.job_id}"]
        if fakes:
            command += [f"--scheduler_binary={FAKE_SCHEDULER}", f"--shard-binary={FAKE_SHARD}"]
            if not worker or worker[0].startswith("-"):  # else the user's program runs
                command.append(f"--worker_binary={FAKE_WORKER}")
        command += list(args) + ["--"] + list(worker)
        with open(self.output_path, "wb") as out:
            self.launcher = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                             env=full_env)
        return self.launcher

    def run_launch(self, *args, timeout=25, **kwargs):
        """Runs the launcher to its end; returns (exit status, output lines, seconds)."""
        start = time.monotonic()
        rc = self.start(*args, **kwargs).wait(timeout=timeout)
        return rc, self.output(), time.monotonic() - start

    def output(self):
        with open(self.output_path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()

    def wait_for_files(self, names, timeout=10):
        deadline = time.monotonic() + timeout
        while not all(os.path.exists(os.path.join(self.fake_dir, n)) for n in names):
            if self.launcher.poll() is not None or time.monotonic() > deadline:
                self.fail(f"{names} did not appear; output:\n" + "\n".join(self.output()))
            time.sleep(0.05)

    def assert_job_gone(self):
        left = job_pids(self.job_id)
        self.assertEqual(left, [], f"processes of job {self.job_id} outlived the launcher")

    def assert_scratch_removed(self):
        left = [n for n in os.listdir(self.dir) if n.startswith("cohort-launch-")]
        self.assertEqual(left, [], "the launcher left its scratch folder behind")

    def assert_all_prefixed(self, lines):
        prefixes = ("launch: ", "[scheduler] ", "[shard ", "[worker ")
        for line in lines:
            self.assertTrue(line.startswith(prefixes), f"unprefixed line: {line!r}")

    def assert_line(self, lines, text):
        self.assertIn(text, lines, "output:\n" + "\n".join(lines))

    def assert_line_starting(self, lines, start):
        self.assertTrue(any(line.startswith(start) for line in lines),
                        f"no line starts with {start!r}; output:\n" + "\n".join(lines))

