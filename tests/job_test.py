#!/usr/bin/python3
"""Whole jobs on this machine: the launcher's LeNet job learns and the numpy checker agrees
(dist_sync, dist_async, two device contexts per worker); each local worker runs on cores of its
own;
SIGKILL of a worker, a shard or the scheduler ends the job within 10 s with a message naming
the member and leaves no process behind; a diverged training (NaN gradients) fails naming the
worker; the three roles started by hand train; a user's own
program runs under the launcher.

Usage: job_test.py LAUNCH SCHEDULER SHARD WORKER LINEAR_REGRESSION CHECK_MODEL JOB_PROCESSES_PY
                   PS_WORKER MAKE_JOB_CERTS
"""

import glob
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

(LAUNCH, SCHEDULER, SHARD, WORKER, LINEAR_REGRESSION, CHECK_MODEL, JOB_PROCESSES, PS_WORKER,
 MAKE_JOB_CERTS, WRITE_IMAGES, PACK_RECORDS) = (os.path.abspath(p) for p in sys.argv[1:12])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_fixture  # noqa: E402
from job_processes import environ_of, wait_job_gone  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"


def environ_of_cpus(pid):
    """The CPUs a job member's COHORT_CPUS names ("0-1,4" → [0, 1, 4])."""
    cpus = []
    for part in environ_of(pid)["COHORT_CPUS"].split(","):
        first, _, last = part.partition("-")
        cpus += range(int(first), int(last or first) + 1)
    return cpus


class JobTestCase(job_fixture.JobTestCase):
    """Jobs the launcher starts, its output in output.txt."""

    def launch(self, *args, worker=()):
        return self.start("output", [LAUNCH, f"--job_id={self.job_id}", *args, "--", *worker])

    def output(self):
        return self.log("output")

    def wait_for_output(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.output(), re.M):
                return
            if all(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.1)
        self.fail(f"no line matching {pattern!r} within {timeout} s:\n{self.output()}")


class LauncherJobTest(JobTestCase):
    def test_lenet_job_learns_and_the_checker_agrees(self):
        model = os.path.join(self.dir, "model.safetensors")
        p = self.launch("-n", "2", "-s", "2",
                        worker=["--model=lenet", "--dataset=fashion-mnist", "--epochs=1",
                                f"--output={model}"])
        self.assertEqual(p.wait(timeout=300), 0, self.output())
        out = self.output()
        # Rank 0 prints the table with the communication column; every line has its prefix.
        self.assertRegex(out, r"\[worker 0\]\s+Step\s+Epoch\s+Speed\(img/s\)\s+Loss\s+LR\s+Comm%\s+ETA")
        self.assertRegex(out, r"\[worker 0\] train: lenet .*batch 64 x 2 worker\(s\).*kvstore dist_sync")
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", out)
        # Workers and shards of one host meet in shared memory (the worker says when not).
        self.assertNotIn("pushing to it over gRPC", out)
        # The workers' last lines are out before the scheduler hears that they finished.
        self.assertLess(out.index("[worker 0] Test top-1"), out.index("job DONE"), out)
        top1 = float(re.search(r"\[worker 0\] Test top-1 ([\d.]+)%", out).group(1))
        self.assertGreaterEqual(top1, 80.0, out)  # one epoch; ten reach >= 90 (benchmarks.md)
        checked = subprocess.run(["/usr/bin/python3", CHECK_MODEL, model, "--data_dir", FASHION],
                                 capture_output=True, text=True, timeout=600)
        self.assertEqual(checked.returncode, 0, checked.stderr)
        checker_top1 = float(re.search(r"top1=([\d.]+)", checked.stdout).group(1))
        self.assertAlmostEqual(checker_top1, top1, delta=0.1)
        self.assertEqual(wait_job_gone(self.job_id, 5), [])

    def test_lenet_job_from_recordio_shards_each_rank_reading_its_own_files(self):
        images, records = os.path.join(self.dir, "fm"), os.path.join(self.dir, "rec")
        for command in (
                [WRITE_IMAGES, "--dataset=fashion-mnist", f"--out={images}",
                 "--train_samples=12000", "--test_samples=2000"],
                [PACK_RECORDS, f"--images={images}", f"--list={images}/train.lst",
                 f"--prefix={records}/train", "--shard_mb=1", "--seed=1"],
                [PACK_RECORDS, f"--images={images}", f"--list={images}/val.lst",
                 f"--prefix={records}/val"]):
            subprocess.run(command, check=True, capture_output=True, timeout=300)
        files = len(glob.glob(f"{records}/train-*.rec"))
        self.assertGreaterEqual(files, 4)
        p = self.launch("-n", "2", "-s", "2",
                        worker=["--model=lenet", f"--dataset=recordio:{records}/train",
                                "--data_partition=files", "--num_classes=10", "--epochs=2",
                                "--image_channels=1", "--image_size=28", "--eval_resize=28",
                                "--image_mean=0.286", "--image_std=0.353", "--output="])
        self.assertEqual(p.wait(timeout=300), 0, self.output())
        out = self.output()
        self.assertIn("[scheduler] scheduler: job DONE: all 2 workers finished", out)
        shares = {}
        for rank in (0, 1):
            m = re.search(rf"\[worker {rank}\] train: rank {rank} of 2 reads files ([\d,]+) of "
                          rf"the {files} of recordio:", out)
            self.assertIsNotNone(m, out)
            shares[rank] = {int(f) for f in m.group(1).split(",")}
        self.assertEqual(shares[0] & shares[1], set(), out)
        self.assertEqual(shares[0] | shares[1], set(range(files)), out)
        self.assertEqual(shares[0], set(range(0, files, 2)), out)
        top1 = float(re.search(r"\[worker 0\] Test top-1 ([\d.]+)%", out).group(1))
        self.assertGreaterEqual(top1, 75.0, out)
        self.assertIn("(2000 images)", out)

    def test_lenet_learns_with_each_gradient_compression(self):
        # 16-bit gradients and values, and 2-bit gradients with error feedback (a threshold
        # suited to LeNet's gradients; MXNet's 0.5 needs more epochs): the band of the
        # uncompressed job.
        for mode in ("fp16", "bf16", "2bit:0.05"):
            with self.subTest(mode=mode):  # one job after the other, under the test's job id
                p = self.launch("-n", "2", "-s", "2",
                                worker=["--model=lenet", "--dataset=fashion-mnist", "--epochs=1",
                                        "--output=", f"--gradient_compression={mode}"])
                self.assertEqual(p.wait(timeout=300), 0, self.output())
                out = self.output()
                self.assertIn(f"gradient compression {mode}", out)
                top1 = float(re.search(r"\[worker 0\] Test top-1 ([\d.]+)%", out).group(1))
                self.assertGreaterEqual(top1, 80.0, out)
                self.assertEqual(wait_job_gone(self.job_id, 5), [])

    def test_dist_async_job_learns(self):
        p = self.launch("-n", "2", "-s", "2", "--mode", "dist_async",
                        worker=["--kv_store=dist_async", "--model=lenet",
                                "--dataset=fashion-mnist", "--epochs=1", "--output="])
        self.assertEqual(p.wait(timeout=300), 0, self.output())
        out = self.output()
        self.assertRegex(out, r"\[worker 0\] train: lenet .*kvstore dist_async")
        top1 = float(re.search(r"\[worker 0\] Test top-1 ([\d.]+)%", out).group(1))
        self.assertGreaterEqual(top1, 80.0, out)  # ten epochs reach 90.00% (benchmarks.md)

    def test_two_device_contexts_per_worker_learn(self):
        """--devices cpu:2: each worker splits its batch over two contexts and reduces locally
        before pushing; the job learns as the one-context job does."""
        p = self.launch("-n", "2", "-s", "1",
                        worker=["--devices=cpu:2", "--model=lenet", "--dataset=fashion-mnist",
                                "--epochs=1", "--output="])
        self.assertEqual(p.wait(timeout=300), 0, self.output())
        out = self.output()
        self.assertRegex(out, r"\[worker 0\] train: lenet .*kvstore dist_sync, backend onednn on cpu:2")
        top1 = float(re.search(r"\[worker 0\] Test top-1 ([\d.]+)%", out).group(1))
        self.assertGreaterEqual(top1, 80.0, out)  # the same job on one context: 86% (benchmarks.md)

    def test_each_local_worker_runs_on_cores_of_its_own(self):
        """Two workers on this machine's cores: each worker, every thread of it, stays on the
        slice of the launcher's CPUs its COHORT_CPUS names, and the slices do not overlap."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("needs two CPUs")
        p = self.launch("-n", "2", "-s", "1",
                        worker=["--model=lenet", "--dataset=fashion-mnist", "--epochs=4",
                                "--output="])
        self.wait_for_output(r"\[worker 0\] +100 ", 120)  # both train (a step is a round)
        half = len(cpus) // 2
        seen = []
        for rank in (0, 1):
            pid = self.member_pid("worker", rank)
            want = cpus[rank * half:(rank + 1) * half]
            self.assertEqual(environ_of_cpus(pid), want)
            for task in os.listdir(f"/proc/{pid}/task"):
                self.assertEqual(os.sched_getaffinity(int(task)), set(want), (rank, task))
            seen += want
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(p.wait(timeout=300), 0, self.output())

    def test_a_worker_port_held_by_hostile_clients_answers_health_while_it_trains(self):
        p = self.launch("-n", "1", "-s", "1",
                        worker=["--model=lenet", "--dataset=fashion-mnist", "--epochs=1",
                                "--output="])
        self.wait_for_output(r"worker 0: metrics on http://[\d.]+:\d+/metrics", 60)
        port = int(re.search(r"worker 0: metrics on http://[\d.]+:(\d+)/metrics",
                             self.output()).group(1))
        self.wait_for_output(r"\[worker 0\]\s+\d+\s+\d+\s+[\d.]+", 60)  # it trains

        def connect(source):
            s = socket.socket()
            s.bind((source, 0))
            s.connect(("127.0.0.1", port))
            return s
        # 500 idle connections from 20 addresses, 50 slowloris clients from one more.
        held = [connect(f"127.0.1.{1 + i % 20}") for i in range(500)]
        slow = [connect("127.0.2.1") for _ in range(50)]
        stop = threading.Event()

        def trickle():
            head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
            i = 0
            while not stop.is_set():
                for s in slow:
                    try:
                        s.send(head[i % len(head):i % len(head) + 1])
                    except OSError:
                        pass  # closed by the server's limits
                i += 1
                stop.wait(0.2)
        slowloris = threading.Thread(target=trickle)
        slowloris.start()
        slowest = 0.0
        try:
            for _ in range(100):
                start = time.monotonic()
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    answer = b""
                    while chunk := s.recv(4096):
                        answer += chunk
                took = time.monotonic() - start
                self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer)
                slowest = max(slowest, took)
                time.sleep(0.02)
        finally:
            stop.set()
            slowloris.join()
            for s in held + slow:
                s.close()
        print(f"slowest /healthz of 100 on a training worker's port beside 500 idle and 50 "
              f"slowloris connections: {slowest * 1000:.1f} ms")
        self.assertLess(slowest, 0.1)
        self.assertIsNone(p.poll(), "the job ended before the probes did: training must go on")
        self.assertEqual(p.wait(timeout=300), 0, self.output())
        self.assertIn("job DONE", self.output())

    def test_bulk_push_pull_values_are_exact_across_processes(self):
        """The benchmark's worker over real TCP: 4 MB tensors of an odd size (split into 1 MiB
        parts, the last one short) and small ones, every pulled value checked exactly."""
        for tensors, size in ((6, 4_000_004), (200, 4096)):
            p = self.launch("-n", "2", "-s", "2",
                            worker=[PS_WORKER, f"--tensors={tensors}", f"--tensor_bytes={size}",
                                    "--warmup=1", "--rounds=3"])
            self.assertEqual(p.wait(timeout=300), 0, self.output())
            self.assertEqual(len(re.findall(r"ps_worker: rank \d .* checked \d+", self.output())),
                             2, self.output())
            self.procs.clear()

    def test_bad_worker_flags_are_said_once_and_nothing_starts(self):
        p = self.launch("-n", "2", "-s", "2", worker=["--epochs=-1"])
        self.assertEqual(p.wait(timeout=60), 2, self.output())
        out = self.output()
        self.assertEqual(out.count("worker: error: --epochs=-1: must be > 0"), 1, out)
        self.assertNotIn("[scheduler]", out)
        self.assertEqual(wait_job_gone(self.job_id, 5), [])

    def test_missing_or_corrupt_data_is_said_once_and_nothing_starts(self):
        bad = os.path.join(self.dir, "bad-data")
        os.makedirs(bad)
        for name in os.listdir(FASHION):  # every file there, the training images cut short
            with open(os.path.join(FASHION, name), "rb") as f:
                data = f.read()
            with open(os.path.join(bad, name), "wb") as f:
                f.write(data[:1000] if name.startswith("train-images") else data)
        for data_dir, says in ((os.path.join(self.dir, "none"), "none"), (bad, "train-images")):
            with self.subTest(data_dir=data_dir):
                p = self.launch("-n", "2", "-s", "2",
                                worker=["--model=lenet", "--dataset=fashion-mnist",
                                        f"--data_dir={data_dir}"])
                self.assertEqual(p.wait(timeout=60), 2, self.output())
                out = self.output()
                self.assertEqual(out.count("worker: error: "), 1, out)
                self.assertIn(says, out)
                self.assertNotIn("[scheduler]", out)
                self.assertEqual(wait_job_gone(self.job_id, 5), [])

    def test_users_own_program_runs_as_the_workers(self):
        p = self.launch("-n", "2", "-s", "2", worker=[LINEAR_REGRESSION])
        self.assertEqual(p.wait(timeout=120), 0, self.output())
        out = self.output()
        finals = {}
        for rank in (0, 1):
            m = re.search(rf"\[worker {rank}\] rank {rank} of 2: last batch loss ([\d.]+), "
                          rf"\|\(w, b\) - truth\| ([\d.]+), w\[1\] (\S+)", out)
            self.assertIsNotNone(m, out)
            self.assertLess(float(m.group(2)), 1e-3)  # found the weights the data came from
            finals[rank] = m.group(3)
        self.assertEqual(finals[0], finals[1])  # both ranks hold the same parameters


class FailFastTest(JobTestCase):
    """SIGKILL one member mid-training: the job ends within 10 s, naming it, leaving nothing."""

    def kill_member_and_check(self, role, rank, name):
        p = self.launch("-n", "2", "-s", "2",
                        worker=["--epochs=5", "--log_interval=20", "--output="])
        self.wait_for_output(r"^\[worker 0\]\s+40\s+0\s", timeout=120)  # training is under way
        victim = self.member_pid(role, rank)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        rc = p.wait(timeout=30)
        took = time.monotonic() - killed_at
        out = self.output()
        print(f"{name} killed: the job ended {took:.1f} s later (exit status {rc})")
        self.assertNotEqual(rc, 0, out)
        self.assertLessEqual(took, 10.0, out)
        self.assertIn(f"launch: {name} (pid {victim}) was killed by signal 9", out)
        self.assertEqual(wait_job_gone(self.job_id, 2), [], out)
        return out

    def test_worker_killed(self):
        out = self.kill_member_and_check("worker", 1, "worker 1")
        self.assertRegex(out, r"\[scheduler\] scheduler: job FAILED: worker 1 \(host .*, pid \d+\) is dead")

    def test_shard_killed(self):
        out = self.kill_member_and_check("shard", 0, "shard 0")
        self.assertRegex(out, r"job FAILED: (shard 0 \(host .*\) is dead|worker \d .* shard 0 at)")

    def test_scheduler_killed(self):
        out = self.kill_member_and_check("scheduler", None, "scheduler")
        self.assertRegex(out, r"lost the scheduler at 127\.0\.0\.1:\d+")

    def test_diverged_training_fails_naming_the_worker_and_the_nan(self):
        """A learning rate of 1e30 sends the gradients to NaN within a step or two: the shard
        refuses the push and the job fails saying which worker pushed what."""
        p = self.launch("-n", "2", "-s", "1",
                        worker=["--train_samples=1280", "--epochs=1", "--lr=1e30", "--output="])
        self.assertNotEqual(p.wait(timeout=120), 0)
        out = self.output()
        self.assertRegex(out, r"\[scheduler\] scheduler: job FAILED: worker \d .* shard 0: "
                              r"worker \d's push of key \d+ part \d+ for version \d+ holds NaN "
                              r"or infinite values: the training diverged on that worker")
        self.assertEqual(wait_job_gone(self.job_id, 2), [], out)


class ManualStartTest(JobTestCase):
    def test_every_role_answers_help_with_its_flags_and_success(self):
        for binary, flag in ((SCHEDULER, "--num_workers"), (SHARD, "--scheduler"),
                             (WORKER, "--scheduler"), (LAUNCH, "--num_shards")):
            with self.subTest(binary=os.path.basename(binary)):
                r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn(flag.lstrip("-"), r.stdout)

    def test_a_role_without_tls_or_insecure_says_which_to_give(self):
        for binary in (SCHEDULER, SHARD, WORKER):
            with self.subTest(binary=os.path.basename(binary)):
                r = subprocess.run([binary, "--scheduler=127.0.0.1:1"] if binary != SCHEDULER
                                   else [binary], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("--tls_dir", r.stderr)
                self.assertIn("--insecure", r.stderr)

    def test_roles_started_by_hand_train_over_mutual_tls(self):
        tls = os.path.join(self.dir, "tls")
        token = self.make_job_tls(MAKE_JOB_CERTS, tls, "job-token-for-this-test")
        secure = [f"--tls_dir={tls}", f"--token_file={token}"]
        port_file = os.path.join(self.dir, "scheduler.port")
        metrics_port_file = os.path.join(self.dir, "scheduler-metrics.port")
        report = os.path.join(self.dir, "job.html")
        scheduler = self.start("scheduler", [SCHEDULER, "--bind=127.0.0.1", "--port=0",
                                             f"--port_file={port_file}", "--num_workers=2",
                                             f"--metrics_port_file={metrics_port_file}",
                                             f"--report_file={report}",
                                             "--num_shards=2", *secure])
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(port_file) as f:
            address = f"127.0.0.1:{int(f.read())}"
        with open(metrics_port_file) as f:
            status_address = f"127.0.0.1:{int(f.read())}"
        # A TLS job serves its pages over HTTPS only, with the role's certificate, and they
        # answer only requests that carry its token.
        ca = ssl.create_default_context(cafile=os.path.join(tls, "ca.pem"))
        ca.check_hostname = False  # issued for "cohort"; the CA is still checked
        host, port = status_address.split(":")

        def fetch(path, header):
            connection = http.client.HTTPSConnection(host, int(port), context=ca, timeout=10)
            try:
                connection.request("GET", path, headers=header)
                answer = connection.getresponse()
                return answer.status, answer.read().decode()
            finally:
                connection.close()

        def get(path, header):
            return fetch(path, header)[0]

        bearer = {"Authorization": "Bearer job-token-for-this-test"}
        # The job page's HTML holds no data: it opens without the token; its data does not.
        status, page = fetch("/", {})
        self.assertEqual(status, 200)
        self.assertIn("const EMBEDDED = /*COHORT_DATA*/null;", page)
        self.assertEqual(get("/history", {}), 401)

        for path in ("/status", "/metrics"):
            for header in ({}, {"Authorization": "Bearer guessed"}):
                self.assertEqual(get(path, header), 401, path)
            self.assertEqual(get(path, bearer), 200)
        with self.assertRaises((urllib.error.URLError, http.client.HTTPException, OSError)):
            urllib.request.urlopen(f"http://{status_address}/healthz", timeout=10)
        r = subprocess.run([LAUNCH, f"--status={status_address}", f"--tls_dir={tls}"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("needs the job's token: give --token_file", r.stderr)
        r = subprocess.run([LAUNCH, f"--status={status_address}", f"--token_file={token}"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("give --tls_dir", r.stderr)
        r = subprocess.run([LAUNCH, f"--status={status_address}", f"--tls_dir={tls}",
                            f"--token_file={token}"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"job \S+: FORMING, 2 workers, 2 shards")
        shards = [self.start(f"shard{i}", [SHARD, f"--scheduler={address}", "--bind=127.0.0.1",
                                           *secure])
                  for i in range(2)]
        model = os.path.join(self.dir, "model.safetensors")
        log_json = os.path.join(self.dir, "log.jsonl")
        workers = [self.start(f"worker{r}", [WORKER, f"--scheduler={address}", f"--rank={r}",
                                             "--epochs=1", "--batch_size=256", "--log_interval=40",
                                             "--part_bytes=65536", f"--output={model}",
                                             "--metrics_bind=127.0.0.1", f"--log_json={log_json}",
                                             *secure])
                   for r in range(2)]
        # While it trains, the page's data: samples of the job's progress, with an ETA once the
        # workers said how long the run is.
        deadline = time.monotonic() + 120
        history = {"samples": []}
        while time.monotonic() < deadline and scheduler.poll() is None:
            history = json.loads(fetch("/history", bearer)[1])
            if any(s["images_per_second"] > 0 for s in history["samples"]):
                break
            time.sleep(0.5)
        self.assertTrue(any(s["images_per_second"] > 0 for s in history["samples"]), history)
        self.assertIn("job RUNNING", [e["text"] for e in history["events"]])
        live = json.loads(fetch("/status", bearer)[1])
        if live["state"] == "RUNNING":
            self.assertEqual(live["total_steps"], 117)
            self.assertGreaterEqual(live["eta_seconds"], 0)
        for name, p in [("worker0", workers[0]), ("worker1", workers[1]), ("scheduler", scheduler),
                        ("shard0", shards[0]), ("shard1", shards[1])]:
            self.assertEqual(p.wait(timeout=300), 0, f"{name}:\n{self.log(name)}")
        # At the end the scheduler wrote the page with the job's data inside.
        with open(report) as f:
            written = f.read()
        embedded = json.loads(re.search(r"const EMBEDDED = (\{.*\});\n", written).group(1))
        self.assertEqual(embedded["status"]["state"], "DONE")
        self.assertEqual(embedded["status"]["job_id"], live["job_id"])
        self.assertGreater(len(embedded["history"]["samples"]), 0)
        self.assertIn(f"job page written to {report}", self.log("scheduler"))
        self.assertRegex(self.log("worker0"), r"(?m)^\s+40\s+0\s+[\d.]+\s+[\d.]+")
        self.assertRegex(self.log("worker0"), r"Test top-1 [\d.]+%")
        # Rank 0 also wrote its progress rows as JSON lines: 60000 / 512 = 117 steps, a row
        # every 40.
        with open(log_json) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual([r["step"] for r in rows], [40, 80])
        self.assertTrue(all(r["images_per_second"] > 0 and r["loss"] > 0 and r["lr"] > 0
                            and 0 <= r["comm_overhead"] <= 1 for r in rows), rows)
        self.assertLess(rows[1]["loss"], rows[0]["loss"] * 1.2)
        self.assertIn("job DONE: all 2 workers finished", self.log("scheduler"))
        # Both workers took every core of the one host (no OMP_NUM_THREADS): the scheduler says so.
        self.assertRegex(self.log("scheduler"),
                         r"scheduler: warning: host \S+: workers 0, 1 run \d+ compute threads on "
                         r"its \d+ cores")
        self.assertTrue(os.path.getsize(model) > 0)
        self.assertEqual(wait_job_gone(self.job_id, 5), [])
        # Six refusals (/history and four more above, and --status without the token), each
        # logged with the address it came from and counted.
        self.assertEqual(len(re.findall(r"refused an HTTP request for /\w+ from 127\.0\.0\.1:\d+",
                                        self.log("scheduler"))), 6, self.log("scheduler"))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
