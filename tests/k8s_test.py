#!/usr/bin/python3
"""The Kubernetes manifests (deploy/k8s): every overlay renders with `kubectl kustomize` and
validates against the Kubernetes schemas offline (npm kubernetes-models); the job's counts
agree across objects; and the CPU overlay's pods, as a kubelet would run them
(tests/kubelet_pods.py), train a short LeNet job under `podman kube play` with the Secret from
tools/k8s/make_secret.sh (mutual TLS and a token).

Skips with a message where kubectl (with kustomize v4 or later), the validator's npm packages
(tools/install_deps.sh), or root and podman are missing.
Usage: k8s_test.py K8S_DIR VALIDATE_MJS MAKE_SECRET_SH BUILD_IMAGES_SH BINARIES...
"""

import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

K8S, VALIDATE, MAKE_SECRET, BUILD_IMAGES = (os.path.abspath(p) for p in sys.argv[1:5])
# kustomize refuses files that resolve outside the kustomization's folder, as runfiles do.
K8S = shutil.copytree(K8S, os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")),
                                        "k8s"))
BINARIES = [os.path.abspath(p) for p in sys.argv[5:]]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import podman_store  # noqa: E402
from kubelet_pods import kubelet_pods  # noqa: E402
from podman_store import PodmanStore  # noqa: E402

OVERLAYS = ("cpu", "gpu", "large")
MODULES = "/var/cache/cohort/k8s-validate/node_modules"


def kustomize_missing():
    if shutil.which("kubectl") is None:
        return "needs kubectl (tools/install_deps.sh installs Debian's kubernetes-client)"
    out = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True).stdout
    m = re.search(r"Kustomize Version: v(\d+)", out)
    if not m or int(m.group(1)) < 4:
        return f"needs kubectl with kustomize v4 or later (labels, patches); this one: {out!r}"
    return None


def render(overlay):
    r = subprocess.run(["kubectl", "kustomize", os.path.join(K8S, "overlays", overlay)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"kubectl kustomize {overlay}: {r.stderr}")
    return r.stdout


def validate(text, workdir):
    """Runs validate.mjs beside the installed modules; returns (exit code, output)."""
    script = os.path.join(workdir, "validate.mjs")
    if not os.path.exists(script):
        shutil.copy(VALIDATE, script)
        os.symlink(MODULES, os.path.join(workdir, "node_modules"))
    r = subprocess.run(["node", script], input=text, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def by_kind(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


@unittest.skipIf(kustomize_missing(), kustomize_missing())
class ManifestTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    @unittest.skipUnless(os.path.isdir(MODULES), f"needs {MODULES} (tools/install_deps.sh)")
    def test_every_overlay_renders_and_validates(self):
        for overlay in OVERLAYS:
            code, out = validate(render(overlay), self.dir)
            self.assertEqual(code, 0, f"{overlay}: {out}")
            self.assertIn("8 objects, 0 invalid", out, overlay)
        secret = subprocess.run([MAKE_SECRET], capture_output=True, text=True, check=True).stdout
        code, out = validate(secret, self.dir)
        self.assertEqual(code, 0, out)
        # The validator refuses what the schemas refuse.
        code, out = validate(render("cpu").replace("completions: 2", "completions: two"), self.dir)
        self.assertEqual(code, 1, out)
        self.assertIn("Job cohort-worker: data/spec/completions must be integer", out)

    def test_the_counts_agree_and_every_pod_is_observable(self):
        want = {"cpu": (2, 2), "gpu": (2, 2), "large": (8, 4)}
        for overlay, (workers, shards) in want.items():
            objects = list(yaml.safe_load_all(render(overlay)))
            config = next(iter(by_kind(objects, "ConfigMap").values()))["data"]
            job = by_kind(objects, "Job")["cohort-worker"]["spec"]
            shard_set = by_kind(objects, "StatefulSet")["cohort-shard"]["spec"]
            self.assertEqual((int(config["NUM_WORKERS"]), job["completions"], job["parallelism"]),
                             (workers,) * 3, overlay)
            self.assertEqual((int(config["NUM_SHARDS"]), shard_set["replicas"]), (shards,) * 2)
            for kind in ("Deployment", "StatefulSet", "Job"):
                for name, o in by_kind(objects, kind).items():
                    template = o["spec"]["template"]
                    ann = template["metadata"]["annotations"]
                    self.assertEqual(ann["prometheus.io/scrape"], "true", name)
                    self.assertTrue(template["spec"]["securityContext"]["runAsNonRoot"], name)
                    (c,) = template["spec"]["containers"]
                    self.assertIn("requests", c["resources"], name)
                    self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/healthz", name)
                    self.assertIn("--tls_dir=/etc/cohort/tls", c["args"], name)
        gpu = by_kind(list(yaml.safe_load_all(render("gpu"))), "Job")["cohort-worker"]
        (c,) = gpu["spec"]["template"]["spec"]["containers"]
        self.assertEqual(c["resources"]["limits"]["nvidia.com/gpu"], 1)
        self.assertEqual(c["image"], "localhost/cohort-worker-gpu:latest")


class KubeletEmulationTest(unittest.TestCase):
    """tests/kubelet_pods.py gives each pod what a kubelet would (runs without podman)."""

    @unittest.skipIf(kustomize_missing(), kustomize_missing())
    def test_pods_get_their_ranks_names_and_the_services_addresses(self):
        objects = list(yaml.safe_load_all(render("cpu")))
        played, addresses = kubelet_pods(objects, "10.89.1", {"cohort-tls": "/tls"})
        pods = {p["metadata"]["name"]: p for p in played if p["kind"] == "Pod"}
        self.assertEqual(addresses, {"cohort-scheduler": "10.89.1.10",
                                     "cohort-shard-0": "10.89.1.11",
                                     "cohort-shard-1": "10.89.1.12",
                                     "cohort-worker-0": "10.89.1.13",
                                     "cohort-worker-1": "10.89.1.14"})
        (shard,) = pods["cohort-shard-1"]["spec"]["containers"]
        self.assertIn("--rank=1", shard["args"])
        self.assertIn("--advertise_address=cohort-shard-1.cohort-shard", shard["args"])
        (scheduler,) = pods["cohort-scheduler"]["spec"]["containers"]
        self.assertIn("--num_workers=2", scheduler["args"])  # $(NUM_WORKERS) from the ConfigMap
        (worker,) = pods["cohort-worker-1"]["spec"]["containers"]
        self.assertIn({"name": "COHORT_RANK", "value": "1"}, worker["env"])
        self.assertNotIn("ports", worker)
        self.assertNotIn("readinessProbe", worker)
        aliases = {h: a["ip"] for a in pods["cohort-worker-0"]["spec"]["hostAliases"]
                   for h in a["hostnames"]}
        self.assertEqual(aliases, {"cohort-scheduler": "10.89.1.10",
                                   "cohort-shard-0.cohort-shard": "10.89.1.11",
                                   "cohort-shard-1.cohort-shard": "10.89.1.12"})
        tls = next(v for v in pods["cohort-worker-0"]["spec"]["volumes"] if v["name"] == "tls")
        self.assertEqual(tls, {"name": "tls", "hostPath": {"path": "/tls", "type": "Directory"}})


def podman_missing():
    return podman_store.why_not() or kustomize_missing()


@unittest.skipIf(podman_missing(), podman_missing())
class KubePlaySmokeTest(unittest.TestCase):
    def setUp(self):
        self.store = PodmanStore("cohort-k8s-")
        self.home = self.store.home
        self.addCleanup(self.store.reset)
        self.store.build_images(BUILD_IMAGES, BINARIES, "scheduler", "shard", "worker")

    def podman(self, *args, **kwargs):
        return self.store.podman(*args, **kwargs)

    def test_cpu_overlay_trains_under_podman_kube_play(self):
        # The Secret's files, readable by the roles' user (a kubelet does this with fsGroup).
        tls = os.path.join(self.home, "tls")
        os.mkdir(tls)
        secret = yaml.safe_load(subprocess.run([MAKE_SECRET], capture_output=True, text=True,
                                               check=True).stdout)
        for name, data in secret["data"].items():
            path = os.path.join(tls, name)
            with open(path, "wb") as f:
                f.write(base64.b64decode(data))
            os.chown(path, 65532, 65532)
            os.chmod(path, 0o440)
        model = os.path.join(self.home, "model")
        os.mkdir(model)
        os.chown(model, 65532, 65532)
        objects = list(yaml.safe_load_all(render("cpu")))
        subnet = f"10.89.{100 + os.getpid() % 100}"
        network = f"cohort-k8s-{os.getpid()}"
        played, addresses = kubelet_pods(objects, subnet, {
            "cohort-tls": tls, "cohort-data": podman_store.DATASET, "cohort-model": model})
        self.assertEqual(sorted(addresses), ["cohort-scheduler", "cohort-shard-0",
                                             "cohort-shard-1", "cohort-worker-0",
                                             "cohort-worker-1"])
        manifest = os.path.join(self.home, "pods.yaml")
        with open(manifest, "w") as f:
            yaml.safe_dump_all(played, f)
        # A network of the test's own, with no route out (--internal).
        self.podman("network", "create", "--internal", "--subnet", f"{subnet}.0/24", network,
                    check=True)
        self.addCleanup(self.podman, "network", "rm", "--force", network)
        self.addCleanup(self.podman, "kube", "down", manifest)
        ips = [a for name in (p["metadata"]["name"] for p in played if p["kind"] == "Pod")
               for a in ("--ip", addresses[name])]
        self.podman("kube", "play", "--network", network, *ips, manifest, check=True)
        for i in (0, 1):
            self.podman("wait", f"cohort-worker-{i}-worker", check=True, timeout=300)
        logs = self.podman("logs", "cohort-worker-0-worker")
        out = logs.stdout + logs.stderr
        top1 = float(re.findall(r"Test top-1 ([\d.]+)%", out)[-1])
        self.assertGreaterEqual(top1, 80.0, out)  # the local job's band
        self.assertTrue(os.path.getsize(os.path.join(model, "model.safetensors")) > 0)
        scheduler = self.podman("logs", "cohort-scheduler-scheduler").stdout
        self.assertIn("job DONE: all 2 workers finished", scheduler)
        self.assertIn("(with the job's token)", scheduler)
        shard = self.podman("logs", "cohort-shard-1-shard").stdout
        self.assertIn("shard 1 of job", shard)


if __name__ == "__main__":
    unittest.main()
