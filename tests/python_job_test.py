#!/usr/bin/python3
"""Python programs as a job's workers (`launch -n 2 -s 2 -- python3 script.py`), on the cohort
package: the numpy example finds the weights its data came from, both ranks holding the same
values; a shard SIGKILLed mid-training ends each Python worker with cohort.Error naming the
shard; a call that waits releases the GIL (tests/gil_probe.py); a program that raises or
exits non-zero fails the job naming the worker, its host and the exception
(tests/failing_program.py); Ctrl-C (SIGINT to the launcher) stops every process of the job.
Usage: python_job_test.py LAUNCH JOB_PROCESSES_PY COHORT_INIT_PY NUMPY_EXAMPLE GIL_PROBE
       FAILING_PROGRAM
"""

import os
import re
import signal
import sys
import time
import unittest

LAUNCH, JOB_PROCESSES, COHORT_INIT, NUMPY_EXAMPLE, GIL_PROBE, FAILING_PROGRAM = (
    os.path.abspath(p) for p in sys.argv[1:7])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_fixture  # noqa: E402
from job_fixture import PYTHON  # noqa: E402
from job_processes import wait_job_gone  # noqa: E402

PACKAGE_ROOT = os.path.dirname(os.path.dirname(COHORT_INIT))


class PythonJobTest(job_fixture.JobTestCase):
    job_prefix = "pyjob"

    def env(self, **extra):
        return super().env(PYTHONPATH=PACKAGE_ROOT, **extra)

    def launch(self, *script):
        return self.start("output", [LAUNCH, f"--job_id={self.job_id}", "-n", "2", "-s", "2",
                                     "--", PYTHON, *script])

    def wait_for_output(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.log("output"), re.M):
                return
            time.sleep(0.1)
        self.fail(f"no line matching {pattern!r} within {timeout} s:\n{self.log('output')}")

    def test_numpy_program_learns_with_equal_parameters_on_every_rank(self):
        p = self.launch(NUMPY_EXAMPLE)
        self.assertEqual(p.wait(timeout=120), 0, self.log("output"))
        out = self.log("output")
        finals = {}
        for rank in (0, 1):
            m = re.search(rf"\[worker {rank}\] rank {rank} of 2: last batch loss ([\d.]+), "
                          rf"\|\(w, b\) - truth\| ([\d.]+), w\[1\] (\S+)", out)
            self.assertIsNotNone(m, out)
            self.assertLess(float(m.group(2)), 1e-3, out)
            finals[rank] = m.group(3)
        self.assertEqual(finals[0], finals[1], out)
        self.assertIn("job DONE: all 2 workers finished", out)

    def test_a_killed_shard_ends_the_python_workers_with_an_error_naming_it(self):
        p = self.launch(NUMPY_EXAMPLE, "--steps=1000000")
        self.wait_for_output(r"^\[shard 1\] shard 1 of job", timeout=60)
        time.sleep(1)  # training under way
        os.kill(self.member_pid("shard", 1), signal.SIGKILL)
        self.assertNotEqual(p.wait(timeout=30), 0)
        out = self.log("output")
        self.assertRegex(out, r"\[worker \d\] numpy_kvstore: error: .*shard 1", out)
        self.assertEqual(wait_job_gone(self.job_id, 5), [], out)

    def test_an_exception_in_a_python_worker_fails_the_job_naming_it(self):
        """Rank 1 raises at step 5: the job fails naming worker 1, its host and the exception's
        last line, and so does rank 0's wait; the launcher's last line says the same; nothing is
        left running."""
        p = self.launch(FAILING_PROGRAM, "--raise_at=5")
        self.assertEqual(p.wait(timeout=60), 1, self.log("output"))
        out = self.log("output")
        verdict = (r"worker 1 \(host [^,]+, pid \d+\) failed: the program exited with status 1: "
                   r"ValueError: boom at step 5 \(failing_program.py, line \d+\)")
        self.assertRegex(out, r"\[scheduler\] scheduler: job FAILED: " + verdict)
        self.assertRegex(out, rf"launch: job {self.job_id} failed \(exit status 1\): " + verdict)
        self.assertRegex(out, r"\[worker 0\] cohort._cohort.Error: the job failed: " + verdict)
        self.assertNotIn("job DONE", out)
        self.assertEqual(wait_job_gone(self.job_id, 5), [], out)

    def test_a_python_worker_failing_after_its_last_step_fails_the_job(self):
        """Rank 1 trains to the end, then raises, or calls sys.exit(3): only status 0 finishes a
        worker, so the job fails naming it and why, although rank 0 finished."""
        for flag, status, why in (("--raise_at=20", 1, r": ValueError: boom after the last step "
                                                      r"\(failing_program.py, line \d+\)"),
                                  ("--exit=3", 3, r"\n")):
            with self.subTest(flag):
                self.job_id = f"{self.job_id}-{status}"
                p = self.launch(FAILING_PROGRAM, flag)
                self.assertEqual(p.wait(timeout=60), status, self.log("output"))
                out = self.log("output")
                self.assertRegex(out, r"\[worker 0\] rank 0: 20 steps")
                self.assertRegex(out, r"\[scheduler\] scheduler: job FAILED: worker 1 \(host "
                                      rf"[^,]+, pid \d+\) failed: the program exited with "
                                      rf"status {status}{why}", )
                self.assertEqual(wait_job_gone(self.job_id, 5), [], out)

    def test_a_python_worker_failing_before_it_joins_or_killed_fails_the_job_naming_it(self):
        """Rank 1 raises before it joins the job: the launcher names it, and the scheduler, whose
        members the launcher then stops, names it missing. Rank 1 SIGKILLed mid-training: the scheduler
        finds its control stream ended and fails the job naming it. Nothing is left."""
        p = self.launch(FAILING_PROGRAM, "--raise_at=-2")
        self.assertEqual(p.wait(timeout=60), 1, self.log("output"))
        out = self.log("output")
        self.assertRegex(out, r"\[worker 1\] ValueError: boom before joining")
        self.assertRegex(out, r"launch: worker 1 \(pid \d+\) exited with status 1")
        self.assertRegex(out, r"\[scheduler\] scheduler: job FAILED: .*stopped by SIGTERM while "
                              r"the job formed \(missing worker 1\)")
        self.assertEqual(wait_job_gone(self.job_id, 5), [], out)

        self.job_id += "-killed"
        p = self.launch(FAILING_PROGRAM, "--sleep_at=3")
        self.wait_for_output(r"^\[worker 1\] rank 1: sleeping at step 3", timeout=60)
        os.kill(self.member_pid("worker", 1), signal.SIGKILL)
        self.assertEqual(p.wait(timeout=60), 137, self.log("output"))
        out = self.log("output")
        self.assertRegex(out, r"\[scheduler\] scheduler: job FAILED: worker 1 \(host [^,]+, pid "
                              r"\d+\) is dead: its control stream ended")
        self.assertEqual(wait_job_gone(self.job_id, 5), [], out)

    def test_a_waiting_call_lets_the_programs_other_threads_run(self):
        p = self.launch(GIL_PROBE)
        self.assertEqual(p.wait(timeout=60), 0, self.log("output"))
        m = re.search(r"\[worker 0\] rank 0: barrier ([\d.]+) s, counted (\d+) meanwhile",
                      self.log("output"))
        self.assertIsNotNone(m, self.log("output"))
        self.assertGreater(float(m.group(1)), 1.0)  # rank 1 came 1.5 s late
        # Holding the GIL, the wait would have stopped the counting thread.
        self.assertGreater(int(m.group(2)), 1_000_000, self.log("output"))

    def test_ctrl_c_stops_every_process(self):
        p = self.launch(NUMPY_EXAMPLE, "--steps=1000000")
        self.wait_for_output(r"^\[shard 1\] shard 1 of job", timeout=60)
        time.sleep(1)  # training under way
        self.member_pid("worker", 1)
        p.send_signal(signal.SIGINT)
        self.assertNotEqual(p.wait(timeout=30), 0)
        self.assertEqual(wait_job_gone(self.job_id, 5), [], self.log("output"))


if __name__ == "__main__":
    unittest.main()
