"""//tools:launch end to end with stand-in role programs: output, environment, signals, the
launcher's own death, user programs and start-up failures (launch_fixture.py)."""

import json
import os
import signal
import unittest

from job_processes import job_pids, wait_job_gone
from launch_fixture import FAKE_WORKER, LaunchTestCase, USER_PROG


class LaunchTest(LaunchTestCase):
    def test_job_runs_to_its_end_with_every_line_prefixed(self):
        rc, lines, _ = self.run_launch("-n", "2", "-s", "2", worker=["--partial"])
        self.assertEqual(rc, 0, "\n".join(lines))
        self.assert_all_prefixed(lines)
        self.assert_line_starting(
            lines, "[scheduler] args: --port=0 --num_workers=2 --num_shards=2 --mode=dist_sync"
            f" --linger=0 --job_id={self.job_id} --baseline_images_per_second=0"
            # The job's page, written at its end beside the model (here: the working folder).
            f" --report_file={self.job_id}.html --bind=127.0.0.1 --metrics_port_file=")
        scheduler_args = next(l for l in lines if l.startswith("[scheduler] args: "))
        # A job on this machine's loopback runs in plaintext; the shards are told so too.
        self.assertIn(" --insecure --port_file=", scheduler_args)
        self.assertTrue(any(l.startswith("[shard 0] args: ") and l.endswith(" --insecure")
                            for l in lines), "\n".join(lines))
        for i in range(2):
            self.assert_line_starting(lines, f"[shard {i}] args: --scheduler=127.0.0.1:4242"
                                      f" --rank={i} --bind=127.0.0.1 --metrics_port_file=")
            self.assert_line(lines, f"[shard {i}] stopping")
            self.assert_line(lines, f"[worker {i}] args: --partial")
            self.assert_line(lines, f"[worker {i}] to stderr")  # stderr is captured too
            self.assert_line(lines, f"[worker {i}] no newline")  # flushed at the end
        self.assert_line(lines, "[scheduler] job done")
        self.assert_line_starting(lines, f"launch: job {self.job_id}: scheduler at "
                                  "127.0.0.1:4242 (pid ")
        self.assertIn(", 2 shards, 2 workers, plaintext; workers run ",
                      next(l for l in lines if l.startswith(f"launch: job {self.job_id}: ")))
        self.assertEqual(lines[-1], f"launch: job {self.job_id} finished")
        self.assert_job_gone()
        self.assert_scratch_removed()

    def test_metrics_targets_list_every_process_while_the_job_runs(self):
        targets = os.path.join(self.dir, "targets.json")
        # The fake workers wait for the targets file: slow on a loaded machine, so more time.
        rc, lines, _ = self.run_launch("-n", "2", "-s", "1", f"--metrics_targets={targets}",
                                       "--baseline_images_per_second=250",
                                       env={"FAKE_TARGETS": targets}, timeout=90)
        self.assertEqual(rc, 0, "\n".join(lines))
        self.assert_line(lines, f"launch: Prometheus targets of the job in {targets}")
        self.assert_line_starting(lines, "[scheduler] args: ")
        self.assertIn("--baseline_images_per_second=250",
                      next(l for l in lines if l.startswith("[scheduler] args: ")))
        with open(os.path.join(self.fake_dir, "targets-1.json")) as f:
            seen = json.load(f)
        by_address = {g["targets"][0]: g["labels"] for g in seen}
        self.assertEqual(by_address["127.0.0.1:9100"],
                         {"job": self.job_id, "role": "scheduler", "rank": "0"})
        self.assertEqual(by_address["127.0.0.1:9300"],
                         {"job": self.job_id, "role": "shard", "rank": "0"})
        self.assertEqual(by_address["127.0.0.1:9201"],
                         {"job": self.job_id, "role": "worker", "rank": "1"})
        self.assertFalse(os.path.exists(targets), "the target list outlived the job")

    def test_every_process_learns_the_job_from_its_environment(self):
        rc, lines, _ = self.run_launch("--num-workers=3", "-s1", "--mode", "dist_async")
        self.assertEqual(rc, 0, "\n".join(lines))
        threads = max(1, len(os.sched_getaffinity(0)) // 3)
        for r in range(3):
            self.assert_line(
                lines,
                f"[worker {r}] env: COHORT_JOB_ID={self.job_id} COHORT_ROLE=worker"
                f" COHORT_RANK={r} COHORT_NUM_WORKERS=3 COHORT_NUM_SHARDS=1"
                f" COHORT_SCHEDULER=127.0.0.1:4242 COHORT_MODE=dist_async"
                f" OMP_NUM_THREADS={threads} OMP_WAIT_POLICY=unset")
        self.assert_line(lines, "[shard 0] env: COHORT_ROLE=shard COHORT_RANK=0"
                         " COHORT_SCHEDULER=127.0.0.1:4242 OMP_NUM_THREADS=1")
        self.assert_line(lines, "[scheduler] env: COHORT_ROLE=scheduler COHORT_RANK=unset"
                         " COHORT_SCHEDULER=unset OMP_NUM_THREADS=1")

    def test_more_threads_than_cores_wait_passively(self):
        threads = 2 * len(os.sched_getaffinity(0))
        rc, lines, _ = self.run_launch("-n", "2", "-s", "1",
                                       env={"OMP_NUM_THREADS": str(threads)})
        self.assertEqual(rc, 0, "\n".join(lines))
        for r in range(2):
            self.assertTrue(any(l.startswith(f"[worker {r}] env: ") and
                                l.endswith(f" OMP_NUM_THREADS={threads} OMP_WAIT_POLICY=passive")
                                for l in lines), "\n".join(lines))

    def test_the_users_thread_settings_win(self):
        rc, lines, _ = self.run_launch("-n", "2", "-s", "1",
                                       env={"OMP_NUM_THREADS": "5", "OMP_WAIT_POLICY": "active"})
        self.assertEqual(rc, 0, "\n".join(lines))
        for r in range(2):
            self.assertTrue(any(l.startswith(f"[worker {r}] env: ") and
                                l.endswith(" OMP_NUM_THREADS=5 OMP_WAIT_POLICY=active")
                                for l in lines), "\n".join(lines))
        self.assert_line_starting(lines, "[shard 0] env: COHORT_ROLE=shard")
        self.assertTrue(any(l.startswith("[shard 0] env: ") and l.endswith("OMP_NUM_THREADS=5")
                            for l in lines), "\n".join(lines))

    def _interrupt(self, sig):
        self.start("-n", "2", "-s", "1", worker=["--hang"])
        self.wait_for_files(["worker-0.started", "worker-1.started"])
        self.assertGreaterEqual(len(job_pids(self.job_id)), 4, "scheduler, shard, two workers")
        self.launcher.send_signal(sig)
        rc = self.launcher.wait(timeout=15)
        lines = self.output()
        self.assert_line(lines, "launch: interrupted; stopping 4 processes")
        self.assert_line(lines, f"launch: job {self.job_id} interrupted")
        self.assert_all_prefixed(lines)
        self.assert_job_gone()
        self.assert_scratch_removed()
        return rc

    def test_ctrl_c_stops_every_process(self):
        self.assertEqual(self._interrupt(signal.SIGINT), 130)

    def test_sigterm_stops_every_process(self):
        self.assertEqual(self._interrupt(signal.SIGTERM), 143)

    def test_processes_die_with_the_launcher(self):
        self.start("-n", "2", "-s", "2", worker=["--hang"])
        self.wait_for_files(["worker-0.started", "worker-1.started"])
        self.assertGreaterEqual(len(job_pids(self.job_id)), 5)
        self.launcher.kill()  # SIGKILL: no chance to clean up; PR_SET_PDEATHSIG must do it
        self.launcher.wait()
        left = wait_job_gone(self.job_id, timeout_s=5)
        self.assertEqual(left, [], "processes outlived a SIGKILLed launcher")

    def test_user_program_from_path_gets_the_job_in_its_environment(self):
        prog_dir = os.path.dirname(USER_PROG)
        rc, lines, _ = self.run_launch(
            "-n", "2", "-s", "1", worker=[os.path.basename(USER_PROG), "--epochs", "3"],
            env={"PATH": prog_dir + ":" + os.environ.get("PATH", "/bin:/usr/bin")})
        self.assertEqual(rc, 0, "\n".join(lines))
        cwd = os.path.realpath(os.getcwd())
        for r in range(2):
            self.assert_line(lines, f"[worker {r}] user program rank {r} of 2, scheduler"
                             f" 127.0.0.1:4242, job {self.job_id}, args: --epochs 3, cwd: {cwd}")
        self.assert_job_gone()

    def test_relative_user_program_runs_from_the_users_directory(self):
        # Under `bazel run` the launcher runs in its runfiles; BUILD_WORKING_DIRECTORY is where
        # the user typed the command.
        user_dir = os.path.dirname(USER_PROG)
        rc, lines, _ = self.run_launch(
            "-n", "1", "-s", "1", worker=["./" + os.path.basename(USER_PROG)],
            env={"BUILD_WORKING_DIRECTORY": user_dir})
        self.assertEqual(rc, 0, "\n".join(lines))
        self.assert_line(lines, f"[worker 0] user program rank 0 of 1, scheduler 127.0.0.1:4242,"
                         f" job {self.job_id}, args: , cwd: {os.path.realpath(user_dir)}")

    def test_missing_user_program_is_a_clear_error(self):
        rc, lines, _ = self.run_launch("-n", "1", worker=["no_such_trainer_xyz"])
        self.assertEqual(rc, 1)
        self.assert_line_starting(
            lines, "launch: error: cannot find the program 'no_such_trainer_xyz' in PATH")
        self.assert_job_gone()

    def test_scheduler_failing_at_start_fails_the_job(self):
        rc, lines, _ = self.run_launch("-n", "2", "-s", "2", env={"FAKE_SCHEDULER": "exit3"})
        self.assertEqual(rc, 3, "\n".join(lines))
        self.assert_line(lines, "[scheduler] failing at once")
        self.assert_line_starting(lines, "launch: scheduler (pid ")
        self.assertTrue(any(l.endswith(") exited with status 3 before it wrote its port file")
                            for l in lines), "\n".join(lines))
        self.assertFalse(any(l.startswith(("[shard", "[worker")) for l in lines))
        self.assert_job_gone()

    def test_scheduler_that_never_listens_is_stopped(self):
        rc, lines, seconds = self.run_launch("-n", "1", "-s", "1", "--start_timeout=1",
                                             env={"FAKE_SCHEDULER": "mute"})
        self.assertEqual(rc, 1, "\n".join(lines))
        self.assert_line_starting(lines, "launch: the scheduler did not write its port file ")
        self.assertLess(seconds, 6)
        self.assert_job_gone()

    def test_worker_binary_and_a_user_program_conflict(self):
        rc, lines, _ = self.run_launch("-n", "1", f"--worker_binary={FAKE_WORKER}",
                                       worker=["./train"])
        self.assertEqual(rc, 2)
        self.assert_line_starting(lines, "launch: error: --worker_binary runs with the flags")

    def test_gpu_devices_run_the_gpu_worker(self):
        """--devices gpu:... picks //services:worker_gpu from the launcher's runfiles: it trains
        where there is a GPU and says there is none where there is not; a build without the
        CUDA toolkit has no such worker and says how to get one."""
        runfiles = os.environ.get("RUNFILES_DIR", os.environ.get("TEST_SRCDIR", ""))
        gpu_worker = os.path.join(runfiles, "cohort/services/worker/worker_gpu")
        rc, lines, _ = self.run_launch(
            "-n", "1", "-s", "1", fakes=False, timeout=90,
            worker=["--devices", "gpu:0", "--model=lenet", "--dataset=synthetic:1x28x28:10",
                    "--epochs=1", "--train_samples=256", "--batch_size=64",
                    f"--output={self.dir}/model.safetensors"])
        output = "\n".join(lines)
        if not os.path.exists(gpu_worker):
            self.assertEqual(rc, 1, output)
            self.assert_line_starting(lines, "launch: error: cannot find the worker binary at ")
            self.assertIn("build //services:worker_gpu", output)
            return
        started = next(l for l in lines if l.startswith(f"launch: job {self.job_id}: "))
        self.assertIn("/services/worker/worker_gpu --devices gpu:0 ", started)
        if rc != 0:
            self.assertIn("GPU 0 is not available", output)
            self.assert_line_starting(lines, f"launch: job {self.job_id} failed (exit status 1)")
        self.assert_job_gone()

    def test_bad_worker_flags_are_said_once_before_anything_starts(self):
        rc, lines, _ = self.run_launch("-n", "2", worker=["--bad_flags"])
        self.assertEqual(rc, 2, "\n".join(lines))
        self.assertEqual(lines.count("worker: error: --bad_flags: not a flag"), 1, "\n".join(lines))
        self.assert_line_starting(lines, "launch: error: the workers' flags are wrong")
        self.assertEqual(os.listdir(self.fake_dir), [], "a role was started")
        self.assert_job_gone()

    def test_usage_errors(self):
        cases = [
            ([], "launch: error: give the number of workers with -n N (at least 1)"),
            (["-n", "0"], "launch: error: give the number of workers with -n N (at least 1)"),
            (["-n", "1", "-s", "-1"], "launch: error: the number of shards, -s N, must be at"),
            (["-n", "1", "-s", "0"], "launch: error: the number of shards, -s N, must be at"),
            (["-n", "1", "--launcher", "ssh"], "launch: error: --launcher ssh needs the hosts"),
            (["-n", "1", "--launcher", "local", "-H", "a,b"],
             "launch: error: -H names hosts, which only --launcher ssh uses"),
            (["-n", "3", "-H", "a,b"], "launch: error: 3 workers, but the 2 hosts have 2 slots"),
            (["-n", "1", "-H", "a,a:2"], "launch: error: -H entry 2: host a is listed twice"),
            (["-n", "1", "-H", "no/such/hosts"], "launch: error: -H no/such/hosts: no such hosts"),
            (["-n", "1", "-H", "nosuchhosts"],
             "launch: error: -H nosuchhosts: no such hosts file (for a job on the one host "
             "nosuchhosts, write -H nosuchhosts:1)"),
            (["-n", "1", "-H", "a,-oProxyCommand=sh"],
             "launch: error: -H entry 2: '-oProxyCommand=sh' is not a host name (it starts with"),
            (["-n", "2", "-H", "localhost,node2"],
             "launch: error: the scheduler's host 'localhost' is a loopback name"),
            (["-n", "2", "-H", "a,b", "--scheduler_host=c"],
             "launch: error: --scheduler_host 'c' is not one of the hosts (a, b)"),
            (["-n", "2", "--shard_hosts=a"],
             "launch: error: --scheduler_host and --shard_hosts place processes on the hosts"),
            (["-n", "1", "--insecure", "--tls"], "launch: error: --insecure and --tls"),
            (["-n", "1", "--tls_dir=/nonexistent"], "launch: error: --tls_dir /nonexistent has no"),
            (["-n", "1", "--env==x"], "launch: error: --env '=x': expected NAME or NAME=VALUE"),
            (["-n", "1", "--mode=sync"], "launch: error: unknown --mode 'sync'"),
            (["-n", "1", "stray"], "launch: error: unexpected argument 'stray'"),
            (["-n"], "launch: error: -n needs a value"),
            (["-n", "1", "--job-id=a b"], "launch: error: --job_id 'a b' may hold only"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                rc, lines, _ = self.run_launch(*args)
                self.assertEqual(rc, 2, "\n".join(lines))
                self.assert_line_starting(lines, message)

    def test_help_lists_the_launchers_flags(self):
        rc, lines, _ = self.run_launch("--help", fakes=False)
        text = "\n".join(lines)
        self.assertEqual(rc, 0, text)  # asking for help is not an error
        for flag in ("-num_workers", "-num_shards", "-launcher", "-mode", "-linger", "-job_id",
                     "-scheduler_binary", "-shard_binary", "-worker_binary", "-start_timeout"):
            self.assertIn(flag, text)


if __name__ == "__main__":
    unittest.main()
