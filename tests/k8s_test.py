#!/usr/bin/python3
"""The Kubernetes manifests (deploy/k8s): every overlay renders with `kubectl kustomize` and
validates against the Kubernetes schemas offline (npm kubernetes-models; the JobSet against its
CRD's schema, vendored beside validate.mjs); the job's counts agree across objects; two JobSet
jobs render into one namespace without a clash; and the pods of the CPU overlay and of the
JobSet, as a kubelet would run them (tests/kubelet_pods.py), train a short LeNet job under
`podman kube play` with the Secret from tools/k8s/make_secret.sh (mutual TLS and a token); and
the Python overlay's workers, in an image built by deploy/containers/python-worker.Containerfile
(the wheel installed offline into a base image with no library of Cohort's), fail the job when
one raises, naming it, its pod and the exception, every pod ending by itself.

Skips with a message where kubectl (with kustomize v4 or later), the validator's npm packages
(tools/install_deps.sh), or root and podman are missing.
Usage: k8s_test.py K8S_DIR VALIDATE_MJS MAKE_SECRET_SH BUILD_IMAGES_SH WHEEL FAILING_PROGRAM
    BINARIES...
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

K8S, VALIDATE, MAKE_SECRET, BUILD_IMAGES, WHEEL, FAILING_PROGRAM = (
    os.path.abspath(p) for p in sys.argv[1:7])
# kustomize refuses files that resolve outside the kustomization's folder, as runfiles do.
K8S = shutil.copytree(K8S, os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")),
                                        "k8s"))
BINARIES = [os.path.abspath(p) for p in sys.argv[7:]]
PYTHON_WORKER = os.path.join(os.path.dirname(BUILD_IMAGES), "..", "..", "deploy", "containers",
                             "python-worker.Containerfile")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import podman_store  # noqa: E402
from kubelet_pods import kubelet_pods  # noqa: E402
from podman_store import PodmanStore  # noqa: E402

# The plain-manifest base's overlays and their objects' counts; "jobset" is the JobSet's.
OVERLAYS = {"cpu": 8, "gpu": 9, "gpu-resume": 9, "large": 8, "python": 4}
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
        shutil.copy(os.path.join(os.path.dirname(VALIDATE), "jobset.x-k8s.io_jobsets.yaml"),
                    workdir)
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
        for overlay, count in OVERLAYS.items():
            code, out = validate(render(overlay), self.dir)
            self.assertEqual(code, 0, f"{overlay}: {out}")
            self.assertIn(f"{count} objects, 0 invalid", out, overlay)
        # The Python worker's JobSet: the user's image, the program's args, the job in COHORT_*.
        python = render("python")
        self.assertIn("image: localhost/cohort-python-worker:latest", python)
        self.assertIn("value: $(JOBSET_NAME)-scheduler-0-0.$(JOBSET_NAME):7000", python)
        self.assertIn("- --epochs=2", python)
        self.assertNotIn("--flagfile", python.split("name: workers")[1])
        code, out = validate(render("jobset"), self.dir)
        self.assertEqual(code, 0, out)
        self.assertIn("ok jobset.x-k8s.io/v1alpha2 JobSet cohort", out)
        self.assertIn("4 objects, 0 invalid", out)
        # The JobSet is checked against its CRD's schema.
        code, out = validate(render("jobset").replace("startupPolicyOrder: InOrder",
                                                      "startupPolicyOrder: Whenever"), self.dir)
        self.assertEqual(code, 1, out)
        self.assertIn("JobSet cohort: /spec/startupPolicy/startupPolicyOrder must be equal to one "
                      "of the allowed values", out)
        secret = subprocess.run([MAKE_SECRET], capture_output=True, text=True, check=True).stdout
        code, out = validate(secret, self.dir)
        self.assertEqual(code, 0, out)
        # The validator refuses what the schemas refuse.
        code, out = validate(render("cpu").replace("completions: 2", "completions: two"), self.dir)
        self.assertEqual(code, 1, out)
        self.assertIn("Job cohort-worker: data/spec/completions must be integer", out)

    def test_the_counts_agree_and_every_pod_is_observable(self):
        want = {"cpu": (2, 2), "gpu": (2, 2), "gpu-resume": (2, 2), "large": (8, 4)}
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
        # The GPU job's shards checkpoint into a claim of their own, and gpu-resume goes on
        # from there; each dataset has its own claim.
        for overlay, resumes in (("gpu", False), ("gpu-resume", True)):
            objects = list(yaml.safe_load_all(render(overlay)))
            shards = by_kind(objects, "StatefulSet")["cohort-shard"]["spec"]["template"]["spec"]
            (c,) = shards["containers"]
            self.assertIn("--checkpoint_dir=/checkpoints", c["args"], overlay)
            self.assertEqual("--resume=/checkpoints" in c["args"], resumes, overlay)
            self.assertIn({"name": "checkpoints",
                           "persistentVolumeClaim": {"claimName": "cohort-checkpoints"}},
                          shards["volumes"])
            self.assertEqual(set(by_kind(objects, "PersistentVolumeClaim")),
                             {"cohort-data-cifar10", "cohort-model", "cohort-checkpoints"})


    def test_the_pod_monitor_scrapes_every_pod_over_https_with_the_token(self):
        r = subprocess.run(["kubectl", "kustomize", os.path.join(K8S, "monitoring")],
                           capture_output=True, text=True, check=True)
        (monitor,) = yaml.safe_load_all(r.stdout)
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        self.assertEqual((endpoint["scheme"], endpoint["tlsConfig"]["serverName"]),
                         ("https", "cohort"))
        self.assertEqual(endpoint["authorization"]["credentials"],
                         {"name": "cohort-tls", "key": "token"})
        (selector,) = monitor["spec"]["selector"]["matchExpressions"]
        self.assertEqual(selector["operator"], "In")
        # It finds every pod of both layouts by its labels and its port's name.
        for overlay in ("cpu", "jobset"):
            for o in yaml.safe_load_all(render(overlay)):
                templates = ([r["template"]["spec"]["template"] for r in o["spec"]["replicatedJobs"]]
                             if o["kind"] == "JobSet" else
                             [o["spec"]["template"]] if "template" in o.get("spec", {}) else [])
                for template in templates:
                    labels = template["metadata"]["labels"]
                    self.assertIn(labels.get(selector["key"]), selector["values"],
                                  (overlay, labels))
                    (c,) = template["spec"]["containers"]
                    self.assertIn(endpoint["port"], [p["name"] for p in c["ports"]], overlay)

    def test_a_jobset_ends_with_its_workers_and_two_run_in_one_namespace(self):
        objects = list(yaml.safe_load_all(render("jobset")))
        (jobset,) = by_kind(objects, "JobSet").values()
        spec = jobset["spec"]
        self.assertEqual(spec["successPolicy"], {"operator": "All",
                                                 "targetReplicatedJobs": ["workers"]})
        self.assertEqual(spec["failurePolicy"]["maxRestarts"], 0)
        self.assertGreater(spec["ttlSecondsAfterFinished"], 0)
        config = next(iter(by_kind(objects, "ConfigMap").values()))["data"]
        jobs = {r["name"]: r["template"]["spec"] for r in spec["replicatedJobs"]}
        self.assertEqual(int(config["NUM_WORKERS"]), jobs["workers"]["completions"])
        self.assertEqual(int(config["NUM_SHARDS"]), jobs["shards"]["completions"])
        for name, job in jobs.items():
            pod = job["template"]["spec"]
            # Nothing restarts after success (nor after a failure: the scheduler decided).
            self.assertEqual((pod["restartPolicy"], job["backoffLimit"]), ("Never", 0), name)
            (c,) = pod["containers"]
            self.assertEqual(c["imagePullPolicy"], "IfNotPresent", name)
            self.assertIn("--tls_dir=/etc/cohort/tls", c["args"], name)
        # A second job in the namespace: the overlay with a name suffix clashes in no name, and
        # its JobSet uses its own ConfigMap and claims.
        second = os.path.join(K8S, "overlays", "jobset-b")
        os.makedirs(second, exist_ok=True)
        with open(os.path.join(second, "kustomization.yaml"), "w") as f:
            f.write("resources:\n  - ../jobset\nnameSuffix: -b\n")
        objects_b = list(yaml.safe_load_all(render("jobset-b")))
        names = [(o["kind"], o["metadata"]["name"]) for o in objects + objects_b]
        self.assertEqual(len(names), len(set(names)), names)
        (jobset_b,) = by_kind(objects_b, "JobSet").values()
        self.assertEqual(jobset_b["metadata"]["name"], "cohort-b")
        (config_b,) = by_kind(objects_b, "ConfigMap")
        workers_b = next(r for r in jobset_b["spec"]["replicatedJobs"] if r["name"] == "workers")
        volumes = {v["name"]: v for v in workers_b["template"]["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(volumes["job"]["configMap"]["name"], config_b)
        self.assertEqual(volumes["model"]["persistentVolumeClaim"]["claimName"], "cohort-model-b")
        self.assertEqual(set(by_kind(objects_b, "PersistentVolumeClaim")),
                         {"cohort-data-fashion-mnist-b", "cohort-model-b"})


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

    @unittest.skipIf(kustomize_missing(), kustomize_missing())
    def test_jobset_pods_get_the_controllers_names_and_hosts(self):
        objects = list(yaml.safe_load_all(render("jobset")))
        played, addresses = kubelet_pods(objects, "10.89.2", {"cohort-tls": "/tls"})
        pods = {p["metadata"]["name"]: p for p in played if p["kind"] == "Pod"}
        self.assertEqual(sorted(addresses), ["cohort-scheduler-0-0", "cohort-shards-0-0",
                                             "cohort-shards-0-1", "cohort-workers-0-0",
                                             "cohort-workers-0-1"])
        (shard,) = pods["cohort-shards-0-1"]["spec"]["containers"]
        self.assertIn("--rank=1", shard["args"])
        self.assertIn("--advertise_address=cohort-shards-0-1.cohort", shard["args"])
        self.assertIn("--scheduler=cohort-scheduler-0-0.cohort:7000", shard["args"])
        (worker,) = pods["cohort-workers-0-1"]["spec"]["containers"]
        self.assertIn({"name": "COHORT_RANK", "value": "1"}, worker["env"])
        aliases = {h: a["ip"] for a in pods["cohort-workers-0-0"]["spec"]["hostAliases"]
                   for h in a["hostnames"]}
        self.assertEqual(aliases["cohort-scheduler-0-0.cohort"], addresses["cohort-scheduler-0-0"])
        self.assertEqual(aliases["cohort-shards-0-1.cohort"], addresses["cohort-shards-0-1"])


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

    def free_subnet(self, seed):
        """A 10.89.N (N in 100..199, from seed on) that no interface of this host and no
        network of the store holds: a bridge another run left behind keeps its address."""
        used = subprocess.run(["/usr/sbin/ip", "-o", "-4", "addr"], capture_output=True,
                              text=True).stdout
        used += self.podman("network", "ls", "--format", "json").stdout
        for i in range(100):
            subnet = f"10.89.{100 + (seed + i) % 100}"
            if f"{subnet}." not in used:
                return subnet
        self.fail(f"every subnet 10.89.100-199 is in use:\n{used}")

    def play(self, overlay, pod_names):
        """Plays the overlay's pods and checks the workers trained into the band, the model, and
        the scheduler's verdict."""
        played = self.start_pods(overlay, pod_names)
        for name in pod_names["worker"]:
            self.podman("wait", f"{name}-worker", check=True, timeout=300)
        logs = self.podman("logs", f"{pod_names['worker'][0]}-worker")
        out = logs.stdout + logs.stderr
        top1 = float(re.findall(r"Test top-1 ([\d.]+)%", out)[-1])
        self.assertGreaterEqual(top1, 80.0, out)  # the local job's band
        model = os.path.join(self.home, "model")
        self.assertTrue(os.path.getsize(os.path.join(model, "model.safetensors")) > 0)
        scheduler = self.podman("logs", f"{pod_names['scheduler'][0]}-scheduler").stdout
        self.assertIn("job DONE: all 2 workers finished", scheduler)
        self.assertIn("(with the job's token)", scheduler)
        shard = self.podman("logs", f"{pod_names['shard'][1]}-shard").stdout
        self.assertIn("shard 1 of job", shard)
        return played

    def start_pods(self, overlay, pod_names, worker_args=None):
        """Plays the overlay's pods as a kubelet would, on a network of the test's own.
        pod_names: role -> [pod names], roles scheduler, shard, worker; worker_args: the workers'
        container args in place of the overlay's."""
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
        objects = list(yaml.safe_load_all(render(overlay)))
        if worker_args is not None:
            (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
            (workers,) = [j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "workers"]
            workers["template"]["spec"]["template"]["spec"]["containers"][0]["args"] = worker_args
        subnet = self.free_subnet(os.getpid() + len(overlay))
        network = f"cohort-k8s-{overlay}-{os.getpid()}"
        played, addresses = kubelet_pods(objects, subnet, {
            "cohort-tls": tls, "cohort-data-fashion-mnist": podman_store.DATASET,
            "cohort-model": model})
        self.assertEqual(sorted(addresses), sorted(sum(pod_names.values(), [])))
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
        return played

    def test_cpu_overlay_trains_under_podman_kube_play(self):
        self.play("cpu", {"scheduler": ["cohort-scheduler"],
                          "shard": ["cohort-shard-0", "cohort-shard-1"],
                          "worker": ["cohort-worker-0", "cohort-worker-1"]})

    def test_jobset_runs_to_completion_and_nothing_would_restart(self):
        names = {"scheduler": ["cohort-scheduler-0-0"],
                 "shard": ["cohort-shards-0-0", "cohort-shards-0-1"],
                 "worker": ["cohort-workers-0-0", "cohort-workers-0-1"]}
        played = self.play("jobset", names)
        # Every member ends by itself, successfully, and none restarted: the JobSet succeeds
        # with its workers and its pods (restartPolicy Never) stay completed.
        for role, pods in names.items():
            for name in pods:
                container = f"{name}-{role}"
                self.podman("wait", container, check=True, timeout=120)
                state = self.podman("inspect", "--format",
                                    "{{.State.ExitCode}} {{.RestartCount}}", container).stdout
                if state.split() != ["0", "0"]:  # what the container said, to see why
                    logs = self.podman("logs", "--tail", "40", container)
                    self.fail(f"{container}: exit code and restarts {state.split()}, not 0 0; its "
                              f"last lines:\n{logs.stdout}{logs.stderr}")
        self.assertTrue(all(p["spec"]["restartPolicy"] == "Never"
                            for p in played if p["kind"] == "Pod"))

    def test_python_workers_that_raise_fail_the_jobset_naming_the_rank(self):
        """The Python overlay with tests/failing_program.py as the image's train.py: rank 1
        raises at step 5."""
        self.store.build_images(BUILD_IMAGES, BINARIES, "python-base")
        context = os.path.join(self.home, "python-context")
        os.mkdir(context)
        shutil.copy(WHEEL, context)
        shutil.copy(FAILING_PROGRAM, os.path.join(context, "train.py"))
        self.podman("build", "--quiet", "--network=none", "-f", PYTHON_WORKER, "--build-arg",
                    "BASE=localhost/cohort-python-base:latest", "-t",
                    "localhost/cohort-python-worker:latest", context, check=True, timeout=300)
        names = {"scheduler": ["cohort-scheduler-0-0"],
                 "shard": ["cohort-shards-0-0", "cohort-shards-0-1"],
                 "worker": ["cohort-workers-0-0", "cohort-workers-0-1"]}
        self.start_pods("python", names, worker_args=["--raise_at=5"])
        containers = [f"{name}-{role}" for role, pods in names.items() for name in pods]

        def logs():
            said = {c: self.podman("logs", c) for c in containers}
            return "\n".join(f"--- {c}:\n{r.stdout}{r.stderr}" for c, r in said.items())
        ends = {}
        for role, pods in names.items():
            for name in pods:
                container = f"{name}-{role}"
                try:
                    self.podman("wait", container, check=True, timeout=120)
                except subprocess.TimeoutExpired:
                    self.fail(f"{container} still runs 120 s on:\n{logs()}")
                ends[container] = self.podman("inspect", "--format",
                                              "{{.State.ExitCode}} {{.RestartCount}}",
                                              container).stdout.split()
        self.assertEqual(ends["cohort-workers-0-1-worker"], ["1", "0"], ends)
        for container, (code, restarts) in ends.items():
            self.assertNotEqual(code, "0", f"{container} ended with 0 in a failed job")
            self.assertEqual(restarts, "0", container)
        scheduler = self.podman("logs", "cohort-scheduler-0-0-scheduler")
        self.assertRegex(scheduler.stdout + scheduler.stderr,
                         r"job FAILED: worker 1 \(host cohort-workers-0-1, pid \d+\) failed: "
                         r"the program exited with status 1: ValueError: boom at step 5 "
                         r"\(train\.py, line \d+\)")
        worker0 = self.podman("logs", "cohort-workers-0-0-worker")
        self.assertIn("ValueError: boom at step 5", worker0.stdout + worker0.stderr)


if __name__ == "__main__":
    unittest.main()
