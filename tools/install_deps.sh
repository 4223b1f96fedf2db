#!/usr/bin/env bash
# Installs the Debian packages Cohort needs to build, test and train, only those missing, and the
# npm packages of the dashboard's schema check. Idempotent: prints what it installs, or that
# nothing was missing.
set -euo pipefail

packages=(
  bazel-bootstrap pkg-config g++            # build
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev libabsl-dev
  libgtest-dev libgmock-dev
  libdnnl-dev zlib1g-dev nlohmann-json3-dev prometheus-cpp-dev
  dataset-fashion-mnist                     # the main job's data
  python3 python3-numpy                     # tools/check_model.py
  iperf3 iproute2                           # benchmarks: TCP baseline, network namespaces
  openssl libssl-dev                        # tools/make_job_certs.sh; client certificates checked
  openssh-client rsync                      # launch --launcher ssh, --sync_dst_dir
  openssh-server                            # the multi-host test's hosts
  prometheus                                # promtool and the server, for the metrics tests
  clang-14 libclang-rt-14-dev llvm-14       # tools/fuzz.sh: libFuzzer, sanitizers, symbolizer
  podman runc conmon netavark aardvark-dns catatonit  # images per role, the container job
  slurm-wlm munge                           # the Slurm test's one-node cluster
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
# Node and npm, for the dashboard's schema check: Debian's, unless a node with npm is there.
command -v npm >/dev/null || missing+=(nodejs npm)
SUDO=()
((EUID == 0)) || SUDO=(sudo)
if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#packages[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install_deps: done"
fi

# @grafana/schema and TypeScript, pinned by the lock file, where //deploy/grafana's test looks.
schema_src="$(cd "$(dirname "$0")/../deploy/grafana/schema_check" && pwd)"
schema_dir=/var/cache/cohort/grafana-schema-check
if ! cmp -s "$schema_src/package-lock.json" "$schema_dir/package-lock.json" ||
   [[ ! -d "$schema_dir/node_modules" ]]; then
  echo "install_deps: npm ci in $schema_dir"
  "${SUDO[@]}" mkdir -p "$schema_dir"
  "${SUDO[@]}" cp "$schema_src/package.json" "$schema_src/package-lock.json" "$schema_dir/"
  (cd "$schema_dir" && "${SUDO[@]}" npm ci --no-audit --no-fund --silent)
fi
