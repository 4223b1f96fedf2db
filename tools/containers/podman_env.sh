# Sourced by the container scripts: podman with runc (crun cannot set rlimits on these hosts),
# its storage, state and locks in one folder of its own, and no registry consulted. Needs root.
#   COHORT_CONTAINER_HOME  where images and their build folders live (/var/cache/cohort/containers)
COHORT_CONTAINER_HOME="${COHORT_CONTAINER_HOME:-/var/cache/cohort/containers}"
mkdir -p "$COHORT_CONTAINER_HOME"
cat > "$COHORT_CONTAINER_HOME/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$COHORT_CONTAINER_HOME/events.log"
# File locks in this folder's own tmp_dir: two storages on one host never share a lock.
lock_type = "file"
tmp_dir = "$COHORT_CONTAINER_HOME/libpod"
EOF
cat > "$COHORT_CONTAINER_HOME/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$COHORT_CONTAINER_HOME/storage"
runroot = "$COHORT_CONTAINER_HOME/run"
EOF
cat > "$COHORT_CONTAINER_HOME/registries.conf" <<EOF
unqualified-search-registries = []
EOF
export CONTAINERS_CONF="$COHORT_CONTAINER_HOME/containers.conf"
export CONTAINERS_STORAGE_CONF="$COHORT_CONTAINER_HOME/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$COHORT_CONTAINER_HOME/registries.conf"
# The images' names: localhost/cohort-ROLE:latest.
cohort_image() { echo "localhost/cohort-$1:latest"; }
