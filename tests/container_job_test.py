#!/usr/bin/python3
"""The one-machine container job (deploy/containers/job.yaml under `podman kube play`).

- images built from the checkout's binaries by tools/containers/build_images.sh: one per role,
  FROM scratch, a non-root user, a health check, exported as OCI archives;
- the job (scheduler, 2 shards, 2 workers, Prometheus) trains LeNet into the local job's
  accuracy band; every container's /metrics answers while it trains and Prometheus scraped each;
  the model lands in the cohort-model volume and scores the same in tools/check_model.py;
- stopped mid-job (`podman pod stop -t 2`), every role exits on SIGTERM (143), not killed;
- nothing is left: no container, pod or volume (podman runs with a storage of the test's own).

Needs root, podman and runc (tools/install_deps.sh); skipped with a message otherwise.
Usage: container_job_test.py BUILD_IMAGES_SH JOB_YAML CHECK_MODEL_PY BINARIES...
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import podman_store  # noqa: E402
from podman_store import PodmanStore  # noqa: E402

BUILD_IMAGES, JOB_YAML, CHECK_MODEL = (os.path.abspath(p) for p in sys.argv[1:4])
BINARIES = [os.path.abspath(p) for p in sys.argv[4:]]
ROLES = ("scheduler", "shard", "worker", "prometheus")
# The job's members: container name -> metrics port (job.yaml).
MEMBERS = {"scheduler": 7001, "shard-0": 7101, "shard-1": 7111, "worker-0": 7201,
           "worker-1": 7211}
PROMETHEUS = 7090
PORTS = (7000, 7100, 7110, *MEMBERS.values(), PROMETHEUS)
POD = "cohort-job"


def why_not():
    if podman_store.why_not():
        return podman_store.why_not()
    for port in PORTS:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return f"port {port} of job.yaml is taken on this host"
    return None


def get(port, path="/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        return r.read().decode()


def metric(page, name):
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([\d.e+-]+)$", page, re.M)
    return float(m.group(1)) if m else None


@unittest.skipIf(why_not(), why_not())
class ContainerJobTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.store = PodmanStore("cohort-ct-")
        cls.home = cls.store.home
        cls.addClassCleanup(cls.store.reset)
        cls.addClassCleanup(cls.store.podman, "kube", "down", JOB_YAML)
        start = time.monotonic()
        cls.build = cls.store.build_images(BUILD_IMAGES, BINARIES)
        print(cls.build, f"(built in {time.monotonic() - start:.1f} s)", file=sys.stderr)

    def podman(self, *args, **kwargs):
        return self.store.podman(*args, **kwargs)

    def inspect(self, name, template):
        return self.podman("inspect", name, "--format", template, check=True).stdout.strip()

    def play(self):
        self.addCleanup(self.down)
        start = time.monotonic()
        self.podman("kube", "play", JOB_YAML, check=True)
        return start

    def down(self):
        self.podman("kube", "down", JOB_YAML)
        for volume in ("cohort-model", "cohort-prometheus"):
            self.podman("volume", "rm", "--force", volume)
        left = self.podman("ps", "--all", "--format", "{{.Names}}").stdout.split()
        self.assertEqual(left, [], "containers left behind")
        self.assertEqual(self.podman("pod", "ps", "--quiet").stdout.split(), [], "pods left")
        self.assertEqual(self.podman("volume", "ls", "--quiet").stdout.split(), [], "volumes left")

    def wait_for_metrics(self, start, deadline=60):
        """Polls every member's /metrics until each answered; returns seconds from `start` to
        the first training step (worker 0's steps_total >= 1)."""
        answered, first_step = set(), None
        while time.monotonic() - start < deadline and (len(answered) < len(MEMBERS) or
                                                       first_step is None):
            for name, port in MEMBERS.items():
                try:
                    page = get(port)
                except OSError:
                    continue
                answered.add(name)
                if name == "worker-0" and first_step is None and (metric(
                        page, "cohort_worker_steps_total") or 0) >= 1:
                    first_step = time.monotonic() - start
            time.sleep(0.05)
        self.assertEqual(answered, set(MEMBERS), "members whose /metrics answered")
        self.assertIsNotNone(first_step, "worker 0 made no step")
        return first_step

    def test_images(self):
        for role in ROLES:
            image = f"localhost/cohort-{role}:latest"
            config = json.loads(self.podman("image", "inspect", image, check=True).stdout)[0]
            self.assertEqual(config["Config"]["User"], "65532:65532", role)
            if role != "prometheus":
                self.assertIn("/cohort/bin/healthcheck", config["Healthcheck"]["Test"], role)
            # The binary and what it links, nothing else: no shell, no package manager.
            self.assertLess(config["Size"], 80e6, role)
            archive = os.path.join(self.home, "oci", f"cohort-{role}.oci.tar")
            listing = subprocess.run(["tar", "-tf", archive], capture_output=True, text=True,
                                     check=True).stdout.split()
            self.assertIn("index.json", listing, archive)
            self.assertIn("oci-layout", listing, archive)
            self.assertRegex(self.build, rf"cohort-{role} +[\d.]+ MB")
        helped = self.podman("run", "--rm", "--network=none", "localhost/cohort-worker:latest",
                             "--help")
        self.assertIn("--model", helped.stdout + helped.stderr)
        no_shell = self.podman("run", "--rm", "--network=none", "--entrypoint", "/bin/sh",
                               "localhost/cohort-worker:latest", "-c", "true")
        self.assertNotEqual(no_shell.returncode, 0, "an image holds a shell")

    def test_job_trains_is_scraped_and_leaves_nothing(self):
        start = self.play()
        first_step = self.wait_for_metrics(start)
        print(f"first training step {first_step:.2f} s after podman kube play", file=sys.stderr)
        for name in MEMBERS:  # the image's HEALTHCHECK command, in its container
            image = self.inspect(f"{POD}-{name}", "{{.ImageName}}")
            check = json.loads(self.podman("image", "inspect", image).stdout)[0]["Healthcheck"]
            self.assertEqual(check["Test"][0], "CMD")
            r = self.podman("exec", f"{POD}-{name}", *check["Test"][1:])
            self.assertEqual(r.returncode, 0, f"{name}'s health check: {r.stdout}{r.stderr}")
        for name in ("worker-0", "worker-1"):
            self.podman("wait", f"{POD}-{name}", check=True, timeout=300)
        logs = self.podman("logs", f"{POD}-worker-0", check=True)
        out = logs.stdout + logs.stderr
        top1 = float(re.findall(r"Test top-1 ([\d.]+)%", out)[-1])
        self.assertGreaterEqual(top1, 80.0, out)  # the local job's band (tests/job_test.py)
        self.assertIn("Wrote /model/model.safetensors", out)
        self.podman("wait", f"{POD}-scheduler", f"{POD}-shard-0", f"{POD}-shard-1", check=True)
        for name in MEMBERS:
            self.assertEqual(self.inspect(f"{POD}-{name}", "{{.State.ExitCode}}"), "0", name)
        sched = self.podman("logs", f"{POD}-scheduler").stdout
        self.assertIn("job DONE: all 2 workers finished", sched)
        # Prometheus (still up) scraped every member.
        query = urllib.parse.quote("max_over_time(up[5m])")
        answer = json.loads(get(PROMETHEUS, f"/api/v1/query?query={query}"))
        up = {(r["metric"]["role"], r["metric"]["rank"]): r["value"][1]
              for r in answer["data"]["result"]}
        self.assertEqual(up, {("scheduler", "0"): "1", ("shard", "0"): "1", ("shard", "1"): "1",
                              ("worker", "0"): "1", ("worker", "1"): "1"})
        # The model in its volume scores what the worker said.
        volume = self.podman("volume", "inspect", "cohort-model", "--format",
                             "{{.Mountpoint}}", check=True).stdout.strip()
        checked = subprocess.run([CHECK_MODEL, os.path.join(volume, "model.safetensors")],
                                 capture_output=True, text=True, check=True)
        checked_top1 = float(re.search(r"top1=([\d.]+)", checked.stdout).group(1))
        self.assertAlmostEqual(checked_top1, top1, delta=0.1)

    def test_a_stopped_job_stops_on_sigterm(self):
        start = self.play()
        self.wait_for_metrics(start)
        stop = time.monotonic()
        self.podman("pod", "stop", "--time", "2", POD, check=True)
        stopped_in = time.monotonic() - stop
        codes = {name: self.inspect(f"{POD}-{name}", "{{.State.ExitCode}}") for name in MEMBERS}
        # 143 = 128 + SIGTERM: each role answered the signal; 137 would be the engine's SIGKILL.
        self.assertEqual(set(codes.values()), {"143"}, "".join(
            f"{name} exited {code}:\n{self.podman('logs', f'{POD}-{name}').stdout[-1500:]}"
            f"{self.podman('logs', f'{POD}-{name}').stderr[-1500:]}\n"
            for name, code in codes.items() if code != "143"))
        self.assertLess(stopped_in, 10)
        sched = self.podman("logs", f"{POD}-scheduler").stdout
        self.assertIn("job FAILED", sched)


if __name__ == "__main__":
    unittest.main()
