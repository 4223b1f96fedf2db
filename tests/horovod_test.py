#!/usr/bin/python3
"""Horovod's PyTorch API on Cohort (cohort.torch as hvd):
- the collectives (tests/collectives_program.py, 3 ranks): allreduce (each op, grouped, in place,
  integers), allgather of tensors of differing first dimension and of objects, broadcast and
  broadcast_object from the last rank, broadcast_parameters from it (bf16 and int64 included),
  broadcast_optimizer_state, a DistributedOptimizer over bf16 parameters and SyncBatchNorm;
  every rank checks what it got against what each brought;
- join() (tests/join_program.py, 3 ranks of 6, 4 and 2 steps, averaging gradients and with the
  shards' SGD): the parameters of one process stepping on the mean with zeros for the ranks
  that joined, the same on every rank, and nothing moving when every rank joins at once;
- a script written for Horovod (tests/horovod_mnist.py: local_rank, DistributedSampler,
  broadcast_parameters and broadcast_optimizer_state before the DistributedOptimizer,
  compression, backward_passes_per_step=2, StepLR, metrics averaged with allreduce) run
  unchanged but for its import by `cohortrun -np 2`: every rank ends with the same parameters,
  and its test accuracy is within 0.5 points of the same script on one process with the
  global batch (and the learning rate Horovod's scaling gives the two ranks);
- a Horovod elastic script (tests/elastic_mnist.py: TorchState, ElasticSampler,
  @hvd.elastic.run) in an elastic job of 3 (`cohortrun --min-np 2`): rank 2 SIGKILLed mid-epoch,
  the other two regroup and finish; with --restart_failed_workers the worker started in its
  place joins and all three finish; every rank ends with the same parameters, trained to the
  accuracy of a job nothing happened to.
Usage: horovod_test.py LAUNCH JOB_PROCESSES_PY COHORT_INIT_PY COLLECTIVES_PROGRAM HOROVOD_MNIST
    JOIN_PROGRAM ELASTIC_MNIST
"""

import os
import re
import sys
import unittest

LAUNCH, JOB_PROCESSES, COHORT_INIT, COLLECTIVES, MNIST, JOIN, ELASTIC = (
    os.path.abspath(p) for p in sys.argv[1:8])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_fixture  # noqa: E402
from job_fixture import PYTHON  # noqa: E402
from job_processes import wait_job_gone  # noqa: E402


@unittest.skipIf(job_fixture.torch_missing(), job_fixture.torch_missing())
class HorovodTest(job_fixture.JobTestCase):
    job_prefix = "hvd"

    def env(self, **extra):
        return super().env(PYTHONPATH=os.path.dirname(os.path.dirname(COHORT_INIT)),
                           COHORT_LAUNCH=LAUNCH, **extra)

    def cohortrun(self, name, *argv):
        """`cohortrun ARGV` (its output in `name`), once it ended with status 0."""
        p = self.start(name, [PYTHON, "-m", "cohort.run", f"--job_id={self.job_id}", *argv])
        self.assertEqual(p.wait(timeout=600), 0, self.log(name))
        self.assertEqual(wait_job_gone(self.job_id, 5), [])
        return self.log(name)

    def test_the_collectives_give_every_rank_what_each_brought(self):
        out = self.cohortrun("collectives", "-np", "3", "-s", "1", "python", COLLECTIVES)
        for rank in range(3):
            self.assertIn(f"[worker {rank}] collectives ok on rank {rank} of 3: sum "
                          "[1.5, 1.75, 12.0]", out)
        self.assertIn("job DONE: all 3 workers finished", out)

    def test_join_after_uneven_steps(self):
        for mode, flags in (("averaging", []), ("server optimizer", ["--server_optimizer"])):
            out = self.cohortrun(f"join{len(flags)}", "-np", "3", "-s", "1", "python", JOIN, *flags)
            for rank in range(3):
                self.assertIn(f"[worker {rank}] join ok on rank {rank} of 3 ({mode})", out)

    def test_a_horovod_script_runs_with_its_import_changed(self):
        two = self.cohortrun("two", "-np", "2", "-s", "2", "python", MNIST, "--epochs", "2",
                             "--batch_size", "64", "--lr", "0.02")
        one = self.cohortrun("one", "-np", "1", "-s", "1", "python", MNIST, "--epochs", "2",
                             "--batch_size", "128", "--lr", "0.04")
        digests = re.search(r"\[worker 0\] parameters of every rank: (\w+) (\w+)$", two, re.M)
        self.assertIsNotNone(digests, two)
        self.assertEqual(digests.group(1), digests.group(2), "the ranks' parameters differ")
        accuracy = {}
        for name, out in (("two", two), ("one", one)):
            self.assertRegex(out, r"\[worker 0\] epoch 1: lr 0\.0100, ", out)  # StepLR
            accuracy[name] = float(re.search(r"final test accuracy ([\d.]+)%", out).group(1))
        print(f"{self.id()}: test accuracy 2 ranks {accuracy['two']:.2f}%, one process "
              f"{accuracy['one']:.2f}%", file=sys.stderr)
        self.assertGreater(accuracy["two"], 85.0, two)
        self.assertLessEqual(abs(accuracy["two"] - accuracy["one"]), 0.5, accuracy)

    def test_an_elastic_script_goes_on_when_a_worker_dies_and_when_one_joins(self):
        def run(name, *flags):
            out = self.cohortrun(name, "-np", "3", "-s", "2", "--min-np", "2",
                                 f"--checkpoint_dir={self.dir}/{name}-ckpt",
                                 "--checkpoint_every=5", *flags, "python", ELASTIC,
                                 *(["--die", "2:0:10", "--marker", f"{self.dir}/{name}-died"]
                                   if name != "whole" else []))
            done = re.search(r"\[worker 0\] parameters of all (\d) ranks: (.*)$", out, re.M)
            self.assertIsNotNone(done, out)
            self.assertEqual(len(set(done.group(2).split())), 1, "the ranks' parameters differ")
            accuracy = float(re.search(r"final test accuracy ([\d.]+)%", out).group(1))
            return out, int(done.group(1)), accuracy

        out, workers, died = run("died")
        self.assertIn("launch: worker 2 (pid ", out)
        self.assertIn("[worker 0] regrouped: rank 0 of 2, local rank 0 of 2", out)
        self.assertIn("job DONE: all 2 workers finished", out)
        self.assertEqual(workers, 2)
        out, workers, replaced = run("replaced", "--restart_failed_workers=true")
        self.assertIn("starting worker 3 to join it", out)
        self.assertIn("[worker 0] regrouped: rank 0 of 3, local rank 0 of 3", out)
        self.assertIn("job DONE: all 3 workers finished", out)
        self.assertEqual(workers, 3)
        _, _, whole = run("whole")
        print(f"{self.id()}: test accuracy {whole:.2f}% uninterrupted, {died:.2f}% with a "
              f"worker killed, {replaced:.2f}% with it replaced", file=sys.stderr)
        for accuracy in (died, replaced):
            self.assertGreater(accuracy, whole - 5.0)


if __name__ == "__main__":
    unittest.main()
