"""//tools:launch stopping a job that does not end well: a failed or killed worker, processes
that ignore SIGTERM, and processes still running after every worker finished. These wait out
the launcher's grace periods (launch_fixture.py)."""

import unittest

from launch_fixture import LaunchTestCase


class LaunchStopTest(LaunchTestCase):
    def test_failed_worker_fails_the_job_and_nothing_survives_it(self):
        # The fake scheduler does not notice the failure, and the shard ignores SIGTERM: the
        # launcher waits linger + 3 s, sends SIGTERM, then SIGKILL 2 s later.
        rc, lines, seconds = self.run_launch(
            "-n", "2", "-s", "1", worker=["--fail_rank=1", "--fail_code=1"],
            env={"FAKE_SHARD": "deaf"})
        self.assertEqual(rc, 1, "\n".join(lines))
        self.assert_all_prefixed(lines)
        self.assert_line(lines, "[worker 1] failing with status 1")
        failed = [l for l in lines if l.startswith("launch: worker 1 (pid ")]
        self.assertEqual(len(failed), 1, "\n".join(lines))
        self.assertRegex(failed[0], r"^launch: worker 1 \(pid \d+\) exited with status 1$")
        self.assert_line_starting(lines, "launch: scheduler (pid ")
        self.assertTrue(any(" still running 3s after worker 1 failed; sending SIGTERM" in l
                            for l in lines), "\n".join(lines))
        self.assertTrue(any(l.startswith("launch: shard 0 (pid ") and
                            l.endswith(" still running after SIGTERM; sending SIGKILL")
                            for l in lines), "\n".join(lines))
        self.assertEqual(lines[-1], f"launch: job {self.job_id} failed (exit status 1)")
        self.assertGreaterEqual(seconds, 5)
        self.assert_job_gone()
        self.assert_scratch_removed()

    def test_killed_worker_fails_the_job_with_128_plus_the_signal(self):
        rc, lines, _ = self.run_launch("-n", "2", "-s", "1", worker=["--kill_rank=0"])
        self.assertEqual(rc, 137, "\n".join(lines))
        self.assertTrue(any(l.startswith("launch: worker 0 (pid ") and
                            l.endswith(") was killed by signal 9 (Killed)") for l in lines),
                        "\n".join(lines))
        self.assert_job_gone()

    def test_linger_extends_the_wait_and_reaches_the_scheduler(self):
        rc, lines, seconds = self.run_launch(
            "-n", "1", "-s", "1", "--linger=1", worker=["--fail_rank=0", "--fail_code=7"])
        self.assertEqual(rc, 7, "\n".join(lines))
        self.assert_line_starting(lines, "[scheduler] args: ")
        self.assertTrue(any("--linger=1 " in l for l in lines if l.startswith("[scheduler]")))
        self.assertTrue(any(" still running 4s after worker 0 failed; sending SIGTERM" in l
                            for l in lines), "\n".join(lines))
        self.assertGreaterEqual(seconds, 4)
        self.assert_job_gone()

    def test_processes_still_running_after_the_workers_finish_are_stopped(self):
        rc, lines, seconds = self.run_launch("-n", "2", "-s", "1", env={"FAKE_SCHEDULER": "stay"})
        self.assertEqual(rc, 1, "\n".join(lines))
        self.assert_line(lines, "[worker 0] done")
        self.assert_line(lines, "[worker 1] done")
        self.assertTrue(any(l.startswith("launch: scheduler (pid ") and
                            " still running 10s after every worker finished; sending SIGTERM"
                            in l for l in lines), "\n".join(lines))
        self.assertEqual(lines[-1], f"launch: job {self.job_id} failed (exit status 1)")
        self.assertGreaterEqual(seconds, 10)
        self.assert_job_gone()


if __name__ == "__main__":
    unittest.main()
