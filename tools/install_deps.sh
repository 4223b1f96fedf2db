#!/usr/bin/env bash
# Installs the Debian packages Cohort needs to build, test and train, only those missing.
# Idempotent: prints what it installs, or that nothing was missing.
set -euo pipefail

packages=(
  bazel-bootstrap pkg-config g++            # build
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev libabsl-dev
  libgtest-dev libgmock-dev
  libdnnl-dev zlib1g-dev nlohmann-json3-dev prometheus-cpp-dev
  dataset-fashion-mnist                     # the main job's data
  python3 python3-numpy                     # tools/check_model.py
  iperf3 iproute2                           # benchmarks: TCP baseline, network namespaces
  prometheus                                # promtool and the server, for the metrics tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=()
((EUID == 0)) || SUDO=(sudo)
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"
