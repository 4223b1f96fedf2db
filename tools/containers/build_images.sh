#!/usr/bin/env bash
# Builds Cohort's container images offline, one per role, and exports each as an OCI archive:
#   tools/containers/build_images.sh [--out DIR] [--binaries DIR] [--gpu] [ROLE...]
# Roles: scheduler shard worker prometheus (default: all four), python-base (this machine's
# Python and numpy: a base image for deploy/containers/python-worker.Containerfile), worker-gpu
# (with --gpu: the worker built with the GPU backend, //services:worker_gpu, as
# /cohort/bin/worker, with the cuDNN and cuBLAS libraries from /usr/local/cuda). Each image is
# FROM scratch: the binaries, exactly the libraries they link (ldd), a non-root user (65532) and
# /tmp; no registry is needed. An image whose inputs did not change is kept (label
# cohort.inputs). Prints each image's size. Needs root, podman and runc (tools/install_deps.sh).
# --binaries DIR: take scheduler, shard, worker (worker_gpu) and healthcheck from DIR (a test's
# runfiles) instead of building them with Bazel.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
out="$root/dist/images"
gpu=0
binaries=""
roles=()
while (($#)); do
  case "$1" in
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --binaries) binaries="$(realpath "$2")"; shift 2 ;;
    --gpu) gpu=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "build_images: unknown flag $1" >&2; exit 2 ;;
    *) roles+=("$1"); shift ;;
  esac
done
((${#roles[@]})) || roles=(scheduler shard worker prometheus)
((gpu == 0)) || roles+=(worker-gpu)
# shellcheck source=tools/containers/podman_env.sh
source tools/containers/podman_env.sh

# binary NAME: the path of a role's binary or of healthcheck.
if [[ -n "$binaries" ]]; then
  binary() { echo "$binaries/$1"; }
else
  targets=(//services:scheduler //services:shard //services:worker //tools/containers:healthcheck)
  ((gpu == 0)) || targets+=(//services:worker_gpu)
  bazel build --config=ci "${targets[@]}" >&2
  binary() {
    case "$1" in
      healthcheck) echo "$root/bazel-bin/tools/containers/healthcheck" ;;
      worker_gpu) echo "$root/bazel-bin/services/worker/worker_gpu" ;;
      *) echo "$root/bazel-bin/services/$1/$1" ;;
    esac
  }
fi

# stage ROOTFS FILE...: each file, and every library it links, at its own path in ROOTFS.
stage() {
  local rootfs="$1" f lib
  shift
  for f in "$@"; do
    for lib in $(ldd "$f" | awk '/=> \//{print $3} /^\t\/lib/{print $1}'); do
      [[ -e "$rootfs$lib" ]] || install -D -m 0755 "$(realpath "$lib")" "$rootfs$lib"
    done
  done
}

# rootfs ROLE ROOTFS: what the ROLE's image holds.
rootfs() {
  local role="$1" rootfs="$2"
  rm -rf "$rootfs"
  mkdir -p "$rootfs/etc" "$rootfs/tmp" "$rootfs/cohort/bin"
  chmod 1777 "$rootfs/tmp"
  printf 'root:x:0:0:root:/:/sbin/nologin\ncohort:x:65532:65532:cohort:/tmp:/sbin/nologin\n' \
    > "$rootfs/etc/passwd"
  printf 'root:x:0:\ncohort:x:65532:\n' > "$rootfs/etc/group"
  case "$role" in
    scheduler|shard|worker|worker-gpu)
      # The GPU worker goes in as /cohort/bin/worker: both worker images start the same way.
      local binary="${role%-gpu}" built="${role/-/_}"
      install -m 0755 "$(binary "$built")" "$rootfs/cohort/bin/$binary"
      install -m 0755 "$(binary healthcheck)" "$rootfs/cohort/bin/"
      stage "$rootfs" "$rootfs/cohort/bin/$binary" "$rootfs/cohort/bin/healthcheck"
      ;;
    python-base)
      local lib=/usr/lib/python3.11 packages=/usr/lib/python3/dist-packages
      install -D -m 0755 /usr/bin/python3.11 "$rootfs/usr/bin/python3.11"
      ln -s python3.11 "$rootfs/usr/bin/python3"
      # A shell and rm, as base images have, for the Containerfile's RUN.
      install -D -m 0755 /usr/bin/dash "$rootfs/bin/sh"
      install -D -m 0755 /usr/bin/rm "$rootfs/bin/rm"
      mkdir -p "$rootfs$packages" "$rootfs/usr/share"
      cp -a "$lib" "$rootfs/usr/lib/"
      # Debian's mark that pip leaves its Python to apt: an image's Python is the image's.
      rm -rf "$rootfs$lib/EXTERNALLY-MANAGED" "$rootfs$lib/test"
      cp -a "$packages/numpy" "$packages/pip" "$rootfs$packages/"
      cp -a /usr/share/python-wheels "$rootfs/usr/share/"  # what Debian's pip unbundled
      stage "$rootfs" /usr/bin/python3.11 /usr/bin/dash /usr/bin/rm \
        $(find "$lib/lib-dynload" "$packages/numpy" -name '*.so' -print)
      # The C++ runtime, as every Debian image has it (wheels leave it to the system).
      local runtime
      for runtime in /lib/x86_64-linux-gnu/libstdc++.so.6 /lib/x86_64-linux-gnu/libgcc_s.so.1; do
        install -D -m 0755 "$(realpath "$runtime")" "$rootfs$runtime"
      done
      ;;
    prometheus)
      install -D -m 0755 /usr/bin/prometheus "$rootfs/bin/prometheus"
      stage "$rootfs" /usr/bin/prometheus
      install -m 0644 deploy/prometheus/prometheus.yml deploy/prometheus/cohort_rules.yml \
        deploy/prometheus/cohort_alerts.yml -t "$rootfs/etc/prometheus/" -D
      ;;
  esac
  if [[ "$role" == worker-gpu ]]; then
    # The GPU worker's libraries: cudart is static in the binary; cuDNN loads its engine
    # libraries at run time, so all of them come along, and NVRTC for its runtime-compiled ones.
    local cuda=/usr/local/cuda/lib64 lib
    for lib in "$cuda"/libcudnn*.so.9 "$cuda"/libcublas.so.?? "$cuda"/libcublasLt.so.?? \
               "$cuda"/libnvrtc.so.?? "$cuda"/libnvrtc-builtins.so.??.?; do
      [[ -e "$lib" ]] || continue
      install -D -m 0755 "$(realpath "$lib")" "$rootfs/usr/local/cuda/lib64/$(basename "$lib")"
    done
  fi
}

mkdir -p "$out"
printf '%-18s %11s  %s\n' image size archive
for role in "${roles[@]}"; do
  context="$COHORT_CONTAINER_HOME/context/$role"
  file="deploy/containers/$role.Containerfile"
  [[ -f "$file" ]] || {
    echo "build_images: no $file (roles: scheduler shard worker prometheus python-base" \
      "worker-gpu)" >&2
    exit 2
  }
  rootfs "$role" "$context/rootfs"
  inputs="$( (tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$context" -c rootfs;
             cat "$file") | sha256sum | cut -c1-16)"
  image="$(cohort_image "$role")"
  have="$(podman image inspect --format '{{index .Labels "cohort.inputs"}}' "$image" 2>/dev/null || true)"
  if [[ "$have" != "$inputs" ]]; then
    podman build --quiet --format docker --label "cohort.inputs=$inputs" -f "$file" -t "$image" \
      "$context" >/dev/null
  fi
  archive="$out/cohort-$role.oci.tar"
  if [[ "$(cat "$archive.inputs" 2>/dev/null)" != "$inputs" ]]; then
    rm -f "$archive"
    podman save --quiet --format oci-archive -o "$archive" "$image"
    echo "$inputs" > "$archive.inputs"
  fi
  size="$(podman image inspect --format '{{.Size}}' "$image")"
  printf '%-18s %8.1f MB  %s\n' "cohort-$role" "$(awk "BEGIN{print $size / 1e6}")" "$archive"
done
