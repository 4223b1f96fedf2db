#!/usr/bin/python3
"""Checkpoints, resume and recovery of jobs (W=2, S=2, dist_sync), each ending with a model file
bitwise identical to an uninterrupted run's: a job killed outright (SIGKILL of every process)
after some checkpoints resumes from the newest complete one, for LeNet and for ResNet-20, whose
batch-norm running statistics the shards checkpoint with the parameters; with the newest
checkpoints damaged (a truncated file, a flipped byte) resume names each damaged file and uses
the newest complete one before them; a SIGKILLed shard is restarted from the checkpoint and the
job rolls back to it (--restart_failed_shards), also when a second shard dies 50 ms later or
while the workers roll back; a SIGKILLed scheduler is restarted and the members register with it
again (--restart_scheduler), also as the workers finish (its journal says who already did); a
shard killed as the job is DONE leaves it DONE; a shard killed past its restart limit fails the
job saying so; a resume with another -n, --batch_size or -s is refused; damaged checkpoints are
kept aside; a full disk costs checkpoints, is said at the end, and they resume when space returns.

Usage: recovery_test.py LAUNCH JOB_PROCESSES_PY
"""

import collections
import json
import os
import random
import re
import signal
import sys
import time
import unittest
import urllib.request

LAUNCH, JOB_PROCESSES = (os.path.abspath(p) for p in sys.argv[1:3])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_fixture  # noqa: E402
from job_fixture import complete_steps  # noqa: E402
from job_processes import environ_of, job_pids, kill_job, wait_job_gone  # noqa: E402

# A job: the worker's flags, its steps per epoch and in all, and the checkpoint interval.
Case = collections.namedtuple("Case", "worker steps_per_epoch total_steps every")
# 6400 samples, batch 32 x 2 workers: 100 steps an epoch, 300 in all; a checkpoint every 40.
LENET = Case(["--model=lenet", "--dataset=fashion-mnist", "--train_samples=6400",
              "--batch_size=32", "--epochs=3", "--log_interval=20"], 100, 300, 40)
# As LENET over 5 epochs (500 steps): long enough to scrape a restarted shard before the end.
LENET_LONGER = LENET._replace(worker=[*LENET.worker[:-2], "--epochs=5", "--log_interval=20"],
                              total_steps=500)
# 1280 samples, batch 16 x 2 workers: 40 steps an epoch, 80 in all; a checkpoint every 20.
RESNET20 = Case(["--model=resnet20", "--dataset=synthetic-cifar10", "--train_samples=1280",
                 "--batch_size=16", "--epochs=2", "--log_interval=20"], 40, 80, 20)


def folder(root, step):
    return os.path.join(root, f"v{step:012d}")


def member_target(targets, role, rank):
    """The address of `role` `rank` in the launcher's Prometheus target list, or None."""
    try:
        with open(targets) as f:
            groups = json.load(f)
    except (OSError, ValueError):
        return None
    for g in groups:
        if g["labels"]["role"] == role and g["labels"]["rank"] == str(rank):
            return g["targets"][0]
    return None


def shard_target(targets, rank):
    return member_target(targets, "shard", rank)


def steps_done(address):
    """What a worker's /metrics says of its steps done (cohort_worker_step), or None."""
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(r"^cohort_worker_step(?:\{[^}]*\})? ([\d.e+]+)$", text, re.M)
    return int(float(m.group(1))) if m else None


class RecoveryTest(job_fixture.JobTestCase):
    job_prefix = "recoverytest"

    def job(self, name):
        """The id of the test's job `name`, whose processes are killed at cleanup."""
        job = f"{self.job_id}-{name}"
        self.addCleanup(kill_job, job)
        return job

    def run_job(self, name, *flags, model, case=LENET):
        job = self.job(name)
        p = self.start(name, [LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2", *flags, "--",
                              *case.worker, f"--output={model}"])
        self.assertEqual(p.wait(timeout=600), 0, self.log(name))
        self.assertEqual(wait_job_gone(job, 5), [])
        return self.log(name)

    def model_bytes(self, path):
        with open(path, "rb") as f:
            return f.read()

    # The uninterrupted run's model bytes, by case: one run serves every test of the case.
    uninterrupted_models = {}

    def run_uninterrupted(self, case):
        """Runs the case without interruption (checkpoints under straight/); its model bytes."""
        model = os.path.join(self.dir, "uninterrupted.safetensors")
        out = self.run_job("uninterrupted", f"--checkpoint_dir={self.dir}/straight",
                           f"--checkpoint_every={case.every}", model=model, case=case)
        self.assertIn("[worker 0] Wrote", out)
        return self.model_bytes(model)

    def uninterrupted(self, case=LENET):
        key = tuple(case.worker)
        if key not in self.uninterrupted_models:
            self.uninterrupted_models[key] = self.run_uninterrupted(case)
        return self.uninterrupted_models[key]

    def killed_after(self, root, step, case):
        """Starts the job, SIGKILLs every process of it once the checkpoint at `step` (or a
        later one) is complete, and returns the steps complete then."""
        job = self.job("killed")
        model = os.path.join(self.dir, "resumed.safetensors")
        self.start("killed", [LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2",
                              f"--checkpoint_dir={root}", f"--checkpoint_every={case.every}",
                              "--checkpoint_keep=3", "--", *case.worker, f"--output={model}"])
        deadline = time.monotonic() + 300
        while not [s for s in complete_steps(root) if s >= step]:
            self.assertLess(time.monotonic(), deadline, self.log("killed"))
            self.assertIsNone(self.procs[-1].poll(), self.log("killed"))
            time.sleep(0.02)
        killed = kill_job(job)
        launcher = self.procs[-1]
        launcher.kill()
        launcher.wait()
        self.assertEqual(len(killed), 5, killed)  # the scheduler, 2 shards, 2 workers
        self.assertEqual(wait_job_gone(job, 5), [])
        self.assertFalse(os.path.exists(model), "the job ended before it was killed")
        self.assertLess(max(complete_steps(root)), case.total_steps)
        return complete_steps(root)

    def check_killed_job_resumes_bitwise(self, case):
        want = self.uninterrupted(case)
        root = os.path.join(self.dir, "ckpt")
        steps = self.killed_after(root, 2 * case.every, case)
        self.assertLessEqual(len(steps), 4, steps)  # keep 3 (a 4th while the newest is pruned)
        out = self.run_job("resumed", f"--resume={root}", f"--checkpoint_every={case.every}",
                           model=os.path.join(self.dir, "resumed.safetensors"), case=case)
        newest = max(steps)
        per_epoch = case.steps_per_epoch
        self.assertIn(f"[worker 0] train: resuming at step {newest} (epoch {newest // per_epoch}, "
                      f"step {newest % per_epoch} of {per_epoch})", out)
        for shard in (0, 1):
            self.assertIn(f"[shard {shard}] shard {shard}: resuming from step {newest} "
                          f"({folder(root, newest)})", out)
        self.assertEqual(self.model_bytes(os.path.join(self.dir, "resumed.safetensors")), want)

    def test_replicated_shards_keep_the_model_bitwise(self):
        """--shard_replicas=2: each shard's parts are also kept by the other shard, which takes
        every update the same way; the model is the unreplicated job's, bit for bit."""
        want = self.uninterrupted()
        model = os.path.join(self.dir, "replicated.safetensors")
        out = self.run_job("replicated", "--shard_replicas=2", model=model)
        for rank in (0, 1):
            self.assertRegex(out, rf"\[shard {rank}\] shard {rank}: its backup at [\d.]+:\d+ keeps "
                                  rf"the \d+ parts? it leads; it backs up \d+ parts? of another "
                                  rf"shard")
        self.assertNotIn("is gone", out)
        self.assertEqual(self.model_bytes(model), want)

    def start_replicated(self, name, case, shards, flags=(), moment=None):
        """Starts a `case` job of 2 workers on `shards` shards with --shard_replicas=2 (and
        `flags`) and waits until worker 0 has done 150 steps, or until moment() is true;
        returns the launcher, the job's id, worker 0's metrics address and the model's
        path."""
        job = self.job(name)
        targets = os.path.join(self.dir, "targets.json")
        model = os.path.join(self.dir, f"{name}.safetensors")
        launcher = self.start(name, [
            LAUNCH, f"--job_id={job}", "-n", "2", "-s", str(shards), "--shard_replicas=2",
            *flags, f"--metrics_targets={targets}", "--", *case.worker, f"--output={model}"])
        deadline = time.monotonic() + 300
        worker = None
        while worker is None or not (moment() if moment else (steps_done(worker) or 0) >= 150):
            self.assertLess(time.monotonic(), deadline, self.log(name))
            self.assertIsNone(launcher.poll(), self.log(name))
            worker = worker or member_target(targets, "worker", 0)
            time.sleep(0.001)
        return launcher, job, worker, model

    def check_backups_take_over(self, name, shards, killed, flags=(), moment=None):
        """A LENET_LONGER job with --shard_replicas=2 (and `flags`) on `shards` shards (on this
        host each is backed up by the next): once worker 0 has done 150 steps, or at the moment
        moment() first returns true, the shards `killed` are SIGKILLed 50 ms apart; their
        backups lead their parts from the next push on, the workers send them what the dead
        shards had not answered, and the job ends with the uninterrupted model bit for bit,
        with no roll back. The time from the (first) kill to the first step begun after it is
        printed, and under 1 s."""
        want = self.uninterrupted(LENET_LONGER)
        launcher, job, worker, model = self.start_replicated(name, LENET_LONGER, shards, flags,
                                                             moment)
        self.kill_and_time_next_step(name, job, worker, killed)
        self.assertEqual(launcher.wait(timeout=600), 0, self.log(name))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log(name)
        for rank in killed:
            backup = (rank + 1) % shards
            self.assertRegex(out, rf"launch: shard {rank} \(pid \d+\) was killed by signal 9 "
                                  rf"\(Killed\); its backup leads its parts "
                                  rf"\(--shard_replicas=2\): the job goes on without it")
            self.assertRegex(out, rf"\[scheduler\] scheduler: warning: shard {rank} \(host .*\) "
                                  rf"died \(.*\): shard {backup} \(host .*\) leads share "
                                  rf"{rank} from now on \(no roll back\)")
            for worker_rank in (0, 1):
                self.assertRegex(out, rf"\[worker {worker_rank}\] worker {worker_rank}: shard "
                                      rf"{rank} at [\d.:]+ died; its backup at [\d.:]+ leads its "
                                      rf"parts now \(\d+ sent to it again\)")
        self.assertNotRegex(out, r"rolling back|rolled back|back to step")
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", out)
        self.assertEqual(self.model_bytes(model), want)

    def kill_and_time_next_step(self, name, job, worker, killed):
        """SIGKILLs the shards `killed`, 50 ms apart, and waits for worker 0 (its metrics at
        `worker`) to complete the first step begun after the first kill: printed, and under
        1 s."""
        victims = [self.member(job, "shard", rank) for rank in killed]
        os.kill(victims[0], signal.SIGKILL)
        first_kill = time.monotonic()
        at_kill = steps_done(worker)
        for pid in victims[1:]:
            time.sleep(0.05)
            os.kill(pid, signal.SIGKILL)
        # The step under way at the kill may have had its answers already: the one after it
        # starts after the kill and needs the dead shards' parts.
        while (steps_done(worker) or 0) <= at_kill + 1:
            self.assertLess(time.monotonic() - first_kill, 30, self.log(name))
            time.sleep(0.002)
        took = time.monotonic() - first_kill
        print(f"\nshards {killed} killed from step {at_kill}: worker 0 completed step "
              f"{at_kill + 2}, the first begun after the kill, {took * 1000:.0f} ms later",
              file=sys.stderr)
        self.assertLess(took, 1.0)

    def test_a_restarted_shard_backs_up_its_shares_again_and_leads_them_at_the_next_death(self):
        """Two shards, --shard_replicas=2 --restart_failed_shards: shard 1 is killed at step
        150 and shard 0 leads both shares; the launcher restarts shard 1, which copies both
        from shard 0 while training goes on and says so to the scheduler; shard 0 is killed
        next and shard 1 leads both shares from its copies. The job ends with the
        uninterrupted model bit for bit, with no roll back, each kill's next step within 1 s."""
        name = "comeback"
        want = self.uninterrupted(LENET_LONGER)
        launcher, job, worker, model = self.start_replicated(name, LENET_LONGER, 2,
                                                             ["--restart_failed_shards"])
        self.kill_and_time_next_step(name, job, worker, [1])
        self.wait_for(name, launcher,
                      r"scheduler: warning: shard 1 holds its copy of share 1 \(led by shard 0\)")
        self.kill_and_time_next_step(name, job, worker, [0])
        self.assertEqual(launcher.wait(timeout=600), 0, self.log(name))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log(name)
        self.assertRegex(out, r"launch: shard 1 \(pid \d+\) was killed by signal 9 \(Killed\); "
                              r"its backup leads its parts \(--shard_replicas=2\); restarting "
                              r"it to back up the shares left without a backup, copied from "
                              r"their leaders \(restart 1 of at most 3\)")
        self.assertRegex(out, r"shard 1 is back \(host .*\) [\d.]+ s after its death; it backs "
                              r"up shares 0 \(led by shard 0\), 1 \(led by shard 0\), copying "
                              r"them from their leaders while training goes on")
        for share in (0, 1):
            self.assertRegex(out, rf"\[shard 1\] shard 1: backs up share {share} \(\d+ parts?\) "
                                  rf"led by shard 0 at [\d.:]+, copied in \d+ ms")
        self.assertRegex(out, r"shard 0 \(host .*\) died \(.*\): shard 1 \(host .*\) leads "
                              r"share 0, shard 1 \(host .*\) leads share 1 from now on")
        self.assertNotRegex(out, r"rolling back|rolled back|back to step")
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", out)
        self.assertEqual(self.model_bytes(model), want)

    def test_a_primary_killed_while_a_restarted_shard_copies_its_shares_is_taken_over(self):
        """Four shards, --shard_replicas=2 --restart_failed_shards: shard 1 is killed at step
        150 (shard 2 leads share 1); as soon as the scheduler says the restarted shard 1 is
        back, before or while it copies shares 0 and 1, shard 3 is killed: its backup, shard 0,
        leads share 3 and the copies go on. The job ends with the uninterrupted model bit for
        bit, with no roll back."""
        name = "copying"
        want = self.uninterrupted(LENET_LONGER)
        launcher, job, worker, model = self.start_replicated(name, LENET_LONGER, 4,
                                                             ["--restart_failed_shards"])
        self.kill_and_time_next_step(name, job, worker, [1])
        self.wait_for(name, launcher, "scheduler: warning: shard 1 is back")
        self.kill_and_time_next_step(name, job, worker, [3])
        self.assertEqual(launcher.wait(timeout=600), 0, self.log(name))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log(name)
        self.assertRegex(out, r"shard 3 \(host .*\) died \(.*\): shard 0 \(host .*\) leads "
                              r"share 3 from now on \(no roll back\)")
        for share in (0, 1):
            self.assertRegex(out, rf"\[shard 1\] shard 1: backs up share {share} \(\d+ parts?\) "
                                  rf"led by shard {share * 2} at [\d.:]+, copied in \d+ ms")
        self.assertNotRegex(out, r"rolling back|rolled back|back to step")
        self.assertEqual(self.model_bytes(model), want)

    def test_ten_shard_kills_at_random_moments_keep_the_model_bitwise(self):
        """Three shards, --shard_replicas=2 --restart_failed_shards, LeNet for 2000 steps: ten
        times, at a random moment (mid-push, mid-answer, mid-update: whatever the moment
        holds) 20-300 ms after the restarted shard holds its copies, a random shard is
        SIGKILLed; its shares go to their backups and it comes back as their backup. The job
        ends with the uninterrupted model bit for bit, with no roll back, each kill's next step
        within 1 s. The seed is printed (RANDOM_KILLS_SEED repeats it)."""
        case = LENET._replace(worker=[*LENET.worker[:-2], "--epochs=20", "--log_interval=100"],
                              total_steps=2000)
        name = "random-kills"
        seed = int(os.environ.get("RANDOM_KILLS_SEED") or random.SystemRandom().randrange(1 << 30))
        print(f"\nseed {seed} (RANDOM_KILLS_SEED={seed} repeats it)", file=sys.stderr)
        chooser = random.Random(seed)
        want = self.uninterrupted(case)
        launcher, job, worker, model = self.start_replicated(
            name, case, 3, ["--restart_failed_shards", "--max_shard_restarts=10"])
        deadline = time.monotonic() + 300
        for _ in range(10):
            time.sleep(chooser.uniform(0.02, 0.3))
            rank = chooser.randrange(3)
            seen = len(self.log(name))
            self.kill_and_time_next_step(name, job, worker, [rank])
            # Back, it copies the shares left without a backup; the next kill waits for that.
            back = rf"scheduler: warning: shard {rank} is back .*; it backs up shares? ([^,]+(?:, [^,]+)*), copying"
            while not re.search(back, self.log(name)[seen:]):
                self.assertLess(time.monotonic(), deadline, self.log(name))
                time.sleep(0.002)
            shares = re.findall(r"(\d+) \(led by", re.search(back, self.log(name)[seen:]).group(1))
            for share in shares:
                held = f"scheduler: warning: shard {rank} holds its copy of share {share} "
                while held not in self.log(name)[seen:]:
                    self.assertLess(time.monotonic(), deadline, self.log(name))
                    time.sleep(0.002)
        self.assertEqual(launcher.wait(timeout=600), 0, self.log(name))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log(name)
        self.assertEqual(len(re.findall(r"scheduler: warning: shard \d+ \(host .*\) died \(.*\): ",
                                        out)), 10, out)
        self.assertNotRegex(out, r"rolling back|rolled back|back to step")
        self.assertEqual(self.model_bytes(model), want)

    def test_a_scheduler_restarted_after_a_takeover_runs_the_job_on(self):
        """--shard_replicas=2 --restart_scheduler: shard 1 is killed at step 150 and shard 0
        leads its share; then the scheduler is killed. The restarted scheduler reads from its
        journal that shard 1 is dead and shard 0 leads share 1: the live members join it again
        and the job ends with the uninterrupted model bit for bit, with no roll back."""
        name = "takeover-rescheduled"
        want = self.uninterrupted(LENET_LONGER)
        launcher, job, worker, model = self.start_replicated(name, LENET_LONGER, 2,
                                                             ["--restart_scheduler"])
        self.kill_and_time_next_step(name, job, worker, [1])
        os.kill(self.member(job, "scheduler"), signal.SIGKILL)
        self.assertEqual(launcher.wait(timeout=300), 0, self.log(name))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log(name)
        for member in ("shard 0", "worker 0", "worker 1"):
            self.assertRegex(out, rf"\[scheduler\] scheduler: warning: {member} \(host .*\) "
                                  rf"joined again: this scheduler took over a running job")
        self.assertNotRegex(out, r"rolling back|rolled back|back to step")
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", out)
        self.assertEqual(self.model_bytes(model), want)

    def test_a_dead_shards_backup_takes_its_parts_over_with_no_roll_back(self):
        self.check_backups_take_over("takeover", 2, [1])

    def test_two_shards_killed_50ms_apart_each_with_a_live_backup_are_taken_over(self):
        self.check_backups_take_over("two-takeovers", 4, [0, 2])

    def test_a_shard_killed_while_it_writes_a_checkpoint_is_taken_over(self):
        """Shard 1 killed as the checkpoint at step 200 is being written (its folder is there):
        taken over as at any other moment; shard 0 writes both shares' checkpoints from then
        on, so the launcher names the last step's as the newest complete checkpoint."""
        root = os.path.join(self.dir, "ckpt")
        self.check_backups_take_over(
            "checkpoint-takeover", 2, [1],
            flags=[f"--checkpoint_dir={root}", "--checkpoint_every=100"],
            moment=lambda: os.path.isdir(folder(root, 200)))
        self.assertRegex(self.log("checkpoint-takeover"),
                         r"launch: newest complete checkpoint: step 500 ")

    def test_checkpoints_go_on_after_a_takeover_and_a_resume_of_them_is_bitwise(self):
        """Shard 1 killed at step 150 of a replicated job with checkpoints every 40 steps:
        shard 0 leads share 1 from then on and writes its checkpoints too (the restarted shard
        1 backs it up and writes none), so the checkpoints after the death are complete; the
        whole job killed once step 280's is, a replicated resume from the newest ends with the
        uninterrupted model bit for bit."""
        case = LENET_LONGER
        want = self.uninterrupted(case)
        root = os.path.join(self.dir, "ckpt")
        launcher, job, worker, model = self.start_replicated(
            "ckpt-after-takeover", case, 2, flags=[
                f"--checkpoint_dir={root}", f"--checkpoint_every={case.every}",
                "--checkpoint_keep=5", "--restart_failed_shards"])
        os.kill(self.member(job, "shard", 1), signal.SIGKILL)
        deadline = time.monotonic() + 300
        while not [step for step in complete_steps(root) if step >= 280]:
            self.assertLess(time.monotonic(), deadline, self.log("ckpt-after-takeover"))
            self.assertIsNone(launcher.poll(), self.log("ckpt-after-takeover"))
            time.sleep(0.02)
        kill_job(job)
        launcher.kill()
        launcher.wait()
        self.assertEqual(wait_job_gone(job, 5), [])
        self.assertFalse(os.path.exists(model), "the job ended before it was killed")
        out = self.log("ckpt-after-takeover")
        taken_over = re.findall(r"\[shard 0\] shard 0: checkpoint of share 1 at step (\d+) written",
                                out)
        self.assertTrue(taken_over and min(map(int, taken_over)) > 150, out)
        self.assertRegex(out, r"\[shard 1\] shard 1: backs up share 0 \(\d+ parts?\) led by shard 0")
        back = out[out.index("[scheduler] scheduler: warning: shard 1 is back"):]
        self.assertNotIn("[shard 1] shard 1: checkpoint", back)  # the new shard 1 leads nothing
        newest = max(complete_steps(root))
        resumed = os.path.join(self.dir, "resumed.safetensors")
        out = self.run_job("resumed", "--shard_replicas=2", f"--resume={root}", model=resumed,
                           case=case)
        for shard in (0, 1):
            self.assertIn(f"[shard {shard}] shard {shard}: resuming from step {newest} "
                          f"({folder(root, newest)})", out)
        self.assertEqual(self.model_bytes(resumed), want)

    def test_killed_lenet_job_resumes_bitwise(self):
        self.check_killed_job_resumes_bitwise(LENET)

    def test_killed_resnet20_job_resumes_bitwise(self):
        self.check_killed_job_resumes_bitwise(RESNET20)

    def test_dead_shard_restarts_and_the_job_ends_bitwise(self):
        """SIGKILL of a shard with --restart_failed_shards: the launcher restarts it from the
        newest complete checkpoint, the other shard and both workers roll back to that step, the
        restarted shard's metrics say so, and the job ends with the uninterrupted run's model."""
        case = LENET_LONGER
        want = self.uninterrupted(case)
        job = self.job("restarted")
        root = os.path.join(self.dir, "ckpt")
        targets = os.path.join(self.dir, "targets.json")
        model = os.path.join(self.dir, "restarted.safetensors")
        launcher = self.start("restarted", [
            LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2", f"--checkpoint_dir={root}",
            f"--checkpoint_every={case.every}", "--restart_failed_shards",
            f"--metrics_targets={targets}", "--", *case.worker, f"--output={model}"])
        deadline = time.monotonic() + 300
        while not [s for s in complete_steps(root) if s >= 2 * case.every]:
            self.assertLess(time.monotonic(), deadline, self.log("restarted"))
            self.assertIsNone(launcher.poll(), self.log("restarted"))
            time.sleep(0.01)
        first = shard_target(targets, 1)
        shard = [p for p in job_pids(job)
                 if environ_of(p).get("COHORT_ROLE") == "shard" and
                 environ_of(p).get("COHORT_RANK") == "1"]
        self.assertEqual(len(shard), 1, job_pids(job))
        os.kill(shard[0], signal.SIGKILL)

        # The restarted shard's metrics: the step it came back from.
        resumed = None
        while resumed is None and launcher.poll() is None:
            address = shard_target(targets, 1)
            if address is not None and address != first:
                try:
                    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as r:
                        page = r.read().decode()
                    m = re.search(r"^cohort_shard_resumed_step(?:\{[^}]*\})? (\d+)", page, re.M)
                    resumed = int(m.group(1)) if m and int(m.group(1)) > 0 else None
                except OSError:
                    pass
            time.sleep(0.01)
        self.assertEqual(launcher.wait(timeout=300), 0, self.log("restarted"))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log("restarted")
        self.assertIsNotNone(resumed, out)
        self.assertEqual(resumed % case.every, 0)
        self.assertGreaterEqual(resumed, 2 * case.every)
        self.assertRegex(out, r"launch: shard 1 \(pid \d+\) was killed by signal 9 .*; restarting "
                              r"it from the newest complete checkpoint")
        self.assertIn(f"[shard 1] shard 1: resuming from step {resumed}", out)
        self.assertIn(f"[shard 0] shard 0: rolling back to step {resumed}",
                      out)
        per_epoch = case.steps_per_epoch
        for rank in (0, 1):
            self.assertIn(f"[worker {rank}] train: rank {rank} of 2: rolled back to step {resumed} "
                          f"(epoch {resumed // per_epoch}, step {resumed % per_epoch} of "
                          f"{per_epoch})", out)
        self.assertEqual(self.model_bytes(model), want)

    def check_second_shard_death_is_recovered(self, name, second_dies):
        """Shard 0 SIGKILLed once the checkpoint at 2 * every is complete, then shard 1 once
        second_dies() returns: the launcher restarts both, the workers wait for both, and the
        job ends with the uninterrupted run's model."""
        case = LENET_LONGER
        want = self.uninterrupted(case)
        job = self.job(name)
        root = os.path.join(self.dir, "ckpt")
        model = os.path.join(self.dir, f"{name}.safetensors")
        launcher = self.start(name, [
            LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2", f"--checkpoint_dir={root}",
            f"--checkpoint_every={case.every}", "--restart_failed_shards", "--",
            *case.worker, f"--output={model}"])
        deadline = time.monotonic() + 300
        while not [s for s in complete_steps(root) if s >= 2 * case.every]:
            self.assertLess(time.monotonic(), deadline, self.log(name))
            self.assertIsNone(launcher.poll(), self.log(name))
            time.sleep(0.01)
        first, second = self.member(job, "shard", 0), self.member(job, "shard", 1)
        os.kill(first, signal.SIGKILL)
        second_dies(launcher)
        os.kill(second, signal.SIGKILL)
        self.assertEqual(launcher.wait(timeout=300), 0, self.log(name))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log(name)
        for shard in (0, 1):
            self.assertRegex(out, rf"launch: shard {shard} \(pid \d+\) was killed by signal 9")
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", out)
        self.assertEqual(self.model_bytes(model), want)
        return out

    def test_two_shards_killed_50ms_apart_both_restart(self):
        self.check_second_shard_death_is_recovered("apart", lambda launcher: time.sleep(0.05))

    def test_shard_killed_while_the_workers_roll_back_restarts_too(self):
        """Shard 1 dies once shard 0 is back: as the kill lands, worker 0 finds it gone while it
        rolls the shards back (and waits for it to come back), or a pull after the roll back
        does (and the workers recover again), or worker 0 hears of shard 0's death only once
        shard 1 is back too (and rolls back to both restarted shards at once); the model is
        the uninterrupted one either way."""
        out = self.check_second_shard_death_is_recovered(
            "during", lambda launcher: self.wait_for(
                "during", launcher, r"^\[shard 0\] shard 0: resuming from step"))
        back = re.search(r"\[scheduler\] scheduler: warning: shard 1 is back \(.* at (\S+)\)", out)
        self.assertIsNotNone(back, out)
        self.assertRegex(out, r"\[worker 0\] worker 0: (.*shard 1.*; waiting for that shard to "
                              r"come back|pull of key \d+ part \d+ from shard 1 .*; the shards "
                              r"are back|.*; the shards are back \([^)]*" + re.escape(back[1]) +
                              r"\): rolling back)")

    def test_shard_killed_after_the_job_is_done_leaves_it_done(self):
        """A shard SIGKILLed as the scheduler says the job is DONE: the job's model
        stands, the launcher says so and exits 0 at once. (The shard hears DONE at once and
        leaves: it is stopped from the model's writing on, so that the kill lands after.)"""
        job = self.job("done")
        model = os.path.join(self.dir, "done.safetensors")
        launcher = self.start("done", [
            LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2", "--restart_failed_shards",
            f"--checkpoint_dir={self.dir}/ckpt", f"--checkpoint_every={LENET.every}", "--",
            *LENET.worker, f"--output={model}"])
        self.wait_for("done", launcher, r"^\[worker 0\] Wrote ")
        shard = self.member(job, "shard", 1)
        os.kill(shard, signal.SIGSTOP)
        self.wait_for("done", launcher, r"^\[scheduler\] scheduler: job DONE")
        os.kill(shard, signal.SIGKILL)
        start = time.monotonic()
        self.assertEqual(launcher.wait(timeout=60), 0, self.log("done"))
        self.assertLess(time.monotonic() - start, 6, self.log("done"))  # was an 11 s hang
        self.assertEqual(wait_job_gone(job, 5), [])
        self.assertTrue(os.path.exists(model))

    def test_scheduler_killed_as_the_workers_finish_leaves_the_job_done(self):
        """The scheduler SIGKILLed once rank 1 is done (rank 0 still evaluating and writing):
        the restarted scheduler learns that the workers finished, and the job ends DONE."""
        job = self.job("late")
        model = os.path.join(self.dir, "late.safetensors")
        launcher = self.start("late", [
            LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2", "--restart_scheduler", "--",
            *LENET.worker, f"--output={model}"])
        self.wait_for("late", launcher, r"^\[worker 0\] +20 ")
        scheduler = self.member(job, "scheduler")
        self.wait_for("late", launcher, r"^\[worker 1\] train: rank 1 of 2 done")
        os.kill(scheduler, signal.SIGKILL)
        start = time.monotonic()
        self.assertEqual(launcher.wait(timeout=60), 0, self.log("late"))
        self.assertLess(time.monotonic() - start, 8, self.log("late"))  # was 12 s and FAILED
        self.assertEqual(wait_job_gone(job, 5), [])
        self.assertTrue(os.path.exists(model))
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", self.log("late"))

    def test_a_shard_killed_past_the_restart_limit_fails_the_job_saying_so(self):
        """Shard 1 SIGKILLed 4 times, each once it is back: 3 restarts, then the job fails and
        the launcher's and the scheduler's last words name the limit."""
        case = LENET_LONGER
        job = self.job("limit")
        root = os.path.join(self.dir, "ckpt")
        launcher = self.start("limit", [
            LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2", f"--checkpoint_dir={root}",
            f"--checkpoint_every={case.every}", "--restart_failed_shards", "--",
            *case.worker, f"--output={self.dir}/limit.safetensors"])
        self.wait_for("limit", launcher, r"^\[shard 1\] shard 1: checkpoint at step 40 written")
        for kill in range(1, 5):
            os.kill(self.member(job, "shard", 1), signal.SIGKILL)
            if kill < 4:
                pattern = rf"^\[worker 0\] train: rank 0 of 2: rolled back to step"
                deadline = time.monotonic() + 60
                while len(re.findall(pattern, self.log("limit"), re.M)) < kill:
                    self.assertLess(time.monotonic(), deadline, self.log("limit"))
                    self.assertIsNone(launcher.poll(), self.log("limit"))
                    time.sleep(0.01)
        self.assertNotEqual(launcher.wait(timeout=60), 0)
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log("limit")
        self.assertRegex(out, r"launch: shard 1 \(pid \d+\) was killed by signal 9 \(Killed\); it "
                              r"was restarted 3 times already, the most --restart_failed_shards "
                              r"allows: the job fails")
        self.assertRegex(out, r"\[scheduler\] scheduler: job FAILED: shard 1 \(host .*\) is "
                              r"dead: .*; it was restarted 3 times already, the most "
                              r"--max_shard_restarts \(launch --restart_failed_shards\) allows")

    def test_a_resume_with_another_split_of_the_data_is_refused(self):
        """Checkpoints of 2 workers and 2 shards resumed with 3 workers, another batch or 3
        shards: each is refused naming what the checkpoint was written with."""
        self.run_uninterrupted(LENET)
        root = os.path.join(self.dir, "straight")
        worker = [f if f != "--batch_size=32" else "--batch_size=16" for f in LENET.worker]
        for name, workers, shards, flags, said in [
                ("workers", "3", "2", LENET.worker,
                 r"the checkpoint at step 280 was written by a job of 2 workers at 100 steps an "
                 r"epoch; this job has 3 workers at 66 steps an epoch, so its step 280 would be "
                 r"another point of the data: resume with the -n and --batch_size"),
                ("batch", "2", "2", worker,
                 r"written by a job of 2 workers at 100 steps an epoch; this job has 2 workers at "
                 r"200 steps an epoch"),
                ("shards", "2", "3", LENET.worker,
                 rf"the checkpoints in {re.escape(root)} were written by a job of 2 shards; this "
                 rf"job has 3: resume with -s 2")]:
            job = self.job(name)
            p = self.start(name, [LAUNCH, f"--job_id={job}", "-n", workers, "-s", shards,
                                  f"--resume={root}", "--", *flags,
                                  f"--output={self.dir}/{name}.safetensors"])
            self.assertNotEqual(p.wait(timeout=120), 0, self.log(name))
            self.assertEqual(wait_job_gone(job, 5), [])
            self.assertRegex(self.log(name), r"\[scheduler\] scheduler: job FAILED: .*" + said)

    def start_on_small_disk(self, name, root, free_kb, case, *flags):
        """Starts the job with its checkpoints on a 4 MB tmpfs at root (in a mount namespace of
        its own, gone with its processes) that a filler leaves free_kb free of. The filler's
        path, as this process sees it through the launcher's /proc entry, and the launcher."""
        os.makedirs(root)
        filler = os.path.join(root, "filler")
        script = (f'mount -t tmpfs -o size=4096k cohort-test "{root}" && '
                  f'head -c {4096 - free_kb}k /dev/zero > "{filler}" && exec "$@"')
        launcher = self.start(name, [
            "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", LAUNCH,
            f"--job_id={self.job(name)}", "-n", "2", "-s", "2", f"--checkpoint_dir={root}",
            f"--checkpoint_every={case.every}", *flags, "--", *case.worker,
            f"--output={self.dir}/{name}.safetensors"])
        return f"/proc/{launcher.pid}/root{filler}", launcher

    def test_a_full_disk_costs_checkpoints_says_so_and_they_resume_when_space_returns(self):
        """Checkpoints on a disk with room for about two (0.5 MB each): later ones fail, each
        taking back its files; the shards' and the launcher's last lines name the newest
        complete one and how old it is. With the space back mid-job, checkpoints resume."""
        root = os.path.join(self.dir, "full")
        _, launcher = self.start_on_small_disk("full", root, 1200, LENET)
        self.assertEqual(launcher.wait(timeout=300), 0, self.log("full"))
        out = self.log("full")
        written = collections.Counter(re.findall(
            r"^\[shard \d\] shard \d: checkpoint at step (\d+) written", out, re.M))
        newest = max(int(step) for step, shards in written.items() if shards == 2)
        self.assertLess(newest, 280)
        self.assertRegex(out, r"\[shard \d\] shard \d: error: checkpoint at step \d+ not "
                              r"written to .*: No space left on device; training goes on")
        self.assertRegex(out, r"\[shard \d\] shard \d: warning: the last \d+ checkpoint\(s\) "
                              r"\(steps .*280\) were not written; the newest this shard wrote is "
                              r"step \d+")
        self.assertRegex(out, rf"launch: newest complete checkpoint: step {newest} "
                              rf"\(.*/v{newest:012d}\), written [\d.]+m?s before the end\n*$")

        root = os.path.join(self.dir, "freed")
        filler, launcher = self.start_on_small_disk("freed", root, 1200, LENET)
        self.wait_for("freed", launcher, r"^\[shard \d\] shard \d: error: checkpoint at step \d+ "
                                         r"not written")
        os.remove(filler)
        self.assertEqual(launcher.wait(timeout=300), 0, self.log("freed"))
        out = self.log("freed")
        self.assertRegex(out, r"launch: newest complete checkpoint: step 280 ")
        self.assertNotIn("were not written", out)

    def test_restarted_scheduler_takes_the_running_job_over(self):
        """SIGKILL of the scheduler with --restart_scheduler: the launcher starts it again at its
        address, every member registers with it again within its grace, and the job ends with the
        uninterrupted run's model (the scheduler never touches the parameters)."""
        case = LENET_LONGER
        want = self.uninterrupted(case)
        job = self.job("rescheduled")
        model = os.path.join(self.dir, "rescheduled.safetensors")
        launcher = self.start("rescheduled", [
            LAUNCH, f"--job_id={job}", "-n", "2", "-s", "2", "--restart_scheduler", "--",
            *case.worker, f"--output={model}"])
        deadline = time.monotonic() + 300
        while not re.search(r"^\[worker 0\] +100 ", self.log("rescheduled"), re.M):
            self.assertLess(time.monotonic(), deadline, self.log("rescheduled"))
            self.assertIsNone(launcher.poll(), self.log("rescheduled"))
            time.sleep(0.01)
        scheduler = [p for p in job_pids(job) if environ_of(p).get("COHORT_ROLE") == "scheduler"]
        self.assertEqual(len(scheduler), 1, job_pids(job))
        os.kill(scheduler[0], signal.SIGKILL)
        self.assertEqual(launcher.wait(timeout=300), 0, self.log("rescheduled"))
        self.assertEqual(wait_job_gone(job, 5), [])
        out = self.log("rescheduled")
        self.assertRegex(out, r"launch: scheduler \(pid \d+\) was killed by signal 9 .*; "
                              r"restarting it at 127\.0\.0\.1:\d+")
        for member in ("shard 0", "shard 1", "worker 0", "worker 1"):
            self.assertRegex(out, rf"\[scheduler\] scheduler: warning: {member} \(host .*\) "
                                  rf"joined again: this scheduler took over a running job")
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", out)
        self.assertEqual(self.model_bytes(model), want)

    def test_damaged_newest_checkpoints_are_named_and_skipped(self):
        want = self.run_uninterrupted(LENET)
        root = os.path.join(self.dir, "straight")
        steps = complete_steps(root)
        self.assertEqual(steps, [200, 240, 280], steps)  # every 40 steps, the newest 3 kept
        truncated = os.path.join(folder(root, 280), "shard-0.safetensors")
        with open(truncated, "r+b") as f:
            f.truncate(os.path.getsize(truncated) - 100)
        flipped = os.path.join(folder(root, 240), "shard-1.safetensors")
        with open(flipped, "r+b") as f:
            f.seek(os.path.getsize(flipped) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x10]))
        model = os.path.join(self.dir, "from-200.safetensors")
        out = self.run_job("resumed", f"--resume={root}", "--checkpoint_every=40", model=model)
        for shard in (0, 1):
            self.assertRegex(out, rf"\[shard {shard}\] shard {shard}: skipping a newer checkpoint: "
                                  rf".* {re.escape(truncated)} has \d+ bytes")
            self.assertRegex(out, rf"\[shard {shard}\] shard {shard}: skipping a newer checkpoint: "
                                  rf".* {re.escape(flipped)} does not match its checksum")
            self.assertIn(f"shard {shard}: resuming from step 200", out)
        self.assertIn("[worker 0] train: resuming at step 200 (epoch 2, step 0 of 100)", out)
        self.assertEqual(self.model_bytes(model), want)
        # Kept aside whole for a person, once the shards went on writing.
        for step, damaged in ((280, truncated), (240, flipped)):
            aside = folder(root, step) + ".damaged"
            self.assertRegex(out, rf"\[shard \d\] shard \d: the damaged checkpoint "
                                  rf"{re.escape(folder(root, step))} is kept aside as "
                                  rf"{re.escape(aside)} for a person to look at")
            self.assertTrue(os.path.exists(os.path.join(aside, os.path.basename(damaged))))
        self.assertEqual(complete_steps(root), [200, 240, 280])  # written again


if __name__ == "__main__":
    unittest.main()
