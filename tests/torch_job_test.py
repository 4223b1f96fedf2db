#!/usr/bin/python3
"""A PyTorch script on Cohort (examples/torch_mnist.py, cohort.torch): trained by
`launch -n 2 -s 2` in dist_sync for 20 steps, in both modes (the shards averaging gradients for
the local SGD; the shards running SGD, at a constant rate and following torch's StepLR), its
parameters equal those of the same script in one plain PyTorch process on the global batch
(and, gradients averaged, those of the same script under torch.distributed DDP over gloo, the
benchmark's baseline) to 1e-5 of each tensor's largest magnitude; one epoch
reaches the accuracy band of Cohort's own LeNet job, its Python workers serving the worker
metrics (steps, images, communication overhead) at the addresses the launcher lists.
Usage: torch_job_test.py LAUNCH JOB_PROCESSES_PY COHORT_INIT_PY TORCH_EXAMPLE TORCH_DDP_MNIST
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest
import urllib.request

import numpy as np

LAUNCH, JOB_PROCESSES, COHORT_INIT, EXAMPLE, DDP = (os.path.abspath(p) for p in sys.argv[1:6])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_fixture  # noqa: E402
from job_fixture import PYTHON  # noqa: E402


def metric(page, name):
    m = re.search(rf"^{name}{{[^}}]*}} ([\d.e+-]+)$", page, re.M)
    return m.group(1) if m else None



@unittest.skipIf(job_fixture.torch_missing(), job_fixture.torch_missing())
class TorchJobTest(job_fixture.JobTestCase):
    job_prefix = "torchjob"

    def env(self, **extra):
        return super().env(PYTHONPATH=os.path.dirname(os.path.dirname(COHORT_INIT)), **extra)

    def alone(self, *flags):
        r = subprocess.run([PYTHON, EXAMPLE, "--kv_store", "none", *flags], env=self.env(),
                           cwd=self.dir, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def launch(self, *flags, launcher=()):
        return self.start("output", [LAUNCH, f"--job_id={self.job_id}", "-n", "2", "-s", "2",
                                     *launcher, "--", PYTHON, EXAMPLE, *flags])

    def launched(self, *flags):
        p = self.launch(*flags)
        self.assertEqual(p.wait(timeout=300), 0, self.log("output"))
        return self.log("output")

    def assert_same_parameters(self, mode_flags, flags=(), ddp=False):
        """2 workers of 32 equal one process of 64 (or DDP's 2 processes of 32)."""
        one = os.path.join(self.dir, "one.npz")
        two = os.path.join(self.dir, "two.npz")
        if ddp:
            r = subprocess.run([PYTHON, DDP, "-W", "2", "--", "--steps", "20", "--batch_size",
                                "32", "--save", one, *flags],
                               env=self.env(GLOO_SOCKET_IFNAME="lo"), cwd=self.dir,
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        else:
            self.alone("--steps", "20", "--batch_size", "64", "--save", one, *flags)
        out = self.launched("--steps", "20", "--batch_size", "32", "--save", two, *mode_flags,
                            *flags)
        self.assertIn("job DONE: all 2 workers finished", out)
        a, b = np.load(one), np.load(two)
        self.assertEqual(sorted(a.files), sorted(b.files))
        self.assertEqual(len(a.files), 10)  # LeNet's weights and biases
        largest = 0.0
        for name in a.files:
            scale = float(np.max(np.abs(a[name])))
            error = float(np.max(np.abs(a[name] - b[name])))
            self.assertLessEqual(error, 1e-5 * scale, f"{name}: {error} of {scale}")
            largest = max(largest, error / scale)
        print(f"{self.id()}: largest difference {largest:.1e} of a tensor's largest value",
              file=sys.stderr)

    def test_averaged_gradients_equal_one_process_on_the_global_batch(self):
        self.assert_same_parameters([])

    def test_the_shards_sgd_equals_one_process_on_the_global_batch(self):
        self.assert_same_parameters(["--server_optimizer"])

    def test_averaged_gradients_equal_ddp(self):
        """The benchmark's DDP baseline (tools/bench/torch_ddp_mnist.py) trains the same model."""
        self.assert_same_parameters([], ddp=True)

    def test_the_shards_sgd_follows_a_torch_lr_scheduler(self):
        """StepLR halves the rate every 4 of the 20 steps: the shards update at it each step."""
        self.assert_same_parameters(["--server_optimizer"], ["--lr_step", "4"])

    def scrape_worker(self, targets, rank):
        """Worker rank's /metrics page, once the launcher lists it and it counted 10 steps."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with open(targets) as f:
                    groups = json.load(f)
                address = next(g["targets"][0] for g in groups
                               if g["labels"]["role"] == "worker" and
                               g["labels"]["rank"] == str(rank))
                with urllib.request.urlopen(f"http://{address}/metrics", timeout=2) as r:
                    page = r.read().decode()
                if float(metric(page, "cohort_worker_steps_total") or 0) >= 10:
                    return page
            except (OSError, ValueError, StopIteration):
                pass
            time.sleep(0.1)
        self.fail(f"worker {rank} served no metrics of 10 steps:\n{self.log('output')}")

    def test_one_epoch_reaches_the_band_and_serves_the_workers_metrics(self):
        targets = os.path.join(self.dir, "targets.json")
        p = self.launch("--epochs", "1", "--batch_size", "32",
                        launcher=[f"--metrics_targets={targets}"])
        page = self.scrape_worker(targets, 1)
        steps = float(metric(page, "cohort_worker_steps_total"))
        self.assertEqual(float(metric(page, "cohort_worker_images_total")), 32 * steps, page)
        self.assertIsNotNone(metric(page, "cohort_worker_communication_overhead_ratio"), page)
        self.assertEqual(p.wait(timeout=300), 0, self.log("output"))
        out = self.log("output")
        top1 = float(re.search(r"\[worker 0\] Epoch 0: .* test top-1 ([\d.]+)%", out).group(1))
        self.assertGreaterEqual(top1, 80.0, out)  # Cohort's own LeNet job's band


if __name__ == "__main__":
    unittest.main()
