"""A podman storage of a test's own (images, containers, volumes, state and locks in one
folder, as tools/containers/podman_env.sh sets it up), the role images built into it by
tools/containers/build_images.sh from the binaries under test, and removed whole at the end.

    store = PodmanStore("cohort-ct-")            # skip first when why_not() says so
    store.build_images(BUILD_IMAGES_SH, BINARIES, "scheduler", "shard")
    store.podman("kube", "play", "job.yaml", check=True)
    store.reset()
"""

import os
import shutil
import subprocess
import tempfile

DATASET = "/usr/share/datasets/fashion-mnist"


def why_not():
    """Why containers cannot run the test jobs here, or None."""
    if os.geteuid() != 0:
        return "needs root to run containers"
    for tool in ("podman", "runc"):
        if shutil.which(tool) is None:
            return f"needs {tool} (tools/install_deps.sh installs it)"
    if not os.path.isdir(DATASET):
        return "needs Debian's dataset-fashion-mnist (tools/install_deps.sh installs it)"
    return None


class PodmanStore:
    def __init__(self, prefix):
        # A short path: podman's sockets live under it.
        self.home = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
        # What tools/containers/podman_env.sh exports (it writes these files).
        self.env = dict(os.environ, COHORT_CONTAINER_HOME=self.home,
                        CONTAINERS_CONF=f"{self.home}/containers.conf",
                        CONTAINERS_STORAGE_CONF=f"{self.home}/storage.conf",
                        CONTAINERS_REGISTRIES_CONF=f"{self.home}/registries.conf",
                        # netavark runs iptables, from /usr/sbin (not on Bazel's test PATH).
                        PATH=os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin")
        self.env.pop("TMPDIR", None)

    def podman(self, *args, check=False, timeout=120):
        r = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    def build_images(self, build_images_sh, binaries, *roles):
        """Builds the images (all roles when none is named) from these binaries; exports the
        OCI archives to HOME/oci. Returns the script's output (a size table)."""
        folder = os.path.join(self.home, "binaries")
        os.makedirs(folder, exist_ok=True)
        for path in binaries:
            link = os.path.join(folder, os.path.basename(path))
            if not os.path.lexists(link):  # a second call, for more roles
                os.symlink(path, link)
        r = subprocess.run([build_images_sh, "--binaries", folder, "--out",
                            os.path.join(self.home, "oci"), *roles],
                           env=self.env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise AssertionError(f"build_images.sh failed:\n{r.stdout}{r.stderr}")
        return r.stdout

    def reset(self):
        """Removes every container, pod, volume and image of the store, then the store."""
        self.podman("system", "reset", "--force")
        shutil.rmtree(self.home, ignore_errors=True)
