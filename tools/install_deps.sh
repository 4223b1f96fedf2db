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
  libmicrohttpd-dev libcurl4-openssl-dev    # HTTP(S) ports (/metrics, /status, /healthz), clients
  libturbojpeg0-dev                         # JPEG decoding (image folders, RecordIO, TFRecord)
  dataset-fashion-mnist                     # the main job's data
  python3 python3-numpy                     # tools/check_model.py
  python3-torch                             # the Python package's examples and tests
  python3-venv python3-pip                  # the wheel's test: pip install into a fresh venv
  python3-pil python3-torchvision           # the image path and the exports against torchvision's
  iperf3 iproute2                           # benchmarks: TCP baseline, network namespaces
  openssl libssl-dev                        # tools/make_job_certs.sh; client certificates checked
  openssh-client rsync                      # launch --launcher ssh, --sync_dst_dir
  openssh-server                            # the multi-host test's hosts
  prometheus                                # promtool and the server, for the metrics tests
  clang-14 libclang-rt-14-dev llvm-14       # tools/fuzz.sh: libFuzzer, sanitizers, symbolizer
  podman runc conmon netavark aardvark-dns catatonit  # images per role, the container job
  iptables                                  # netavark's firewall: the Kubernetes test's pod network
  slurm-wlm munge                           # the Slurm test's one-node cluster
  chromium                                  # the job page's test: a real browser, headless
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
# Node and npm, for the dashboard's schema check: Debian's, unless a node with npm is there.
command -v npm >/dev/null || missing+=(nodejs npm)
# kubectl (with kustomize) for the Kubernetes manifests' test: Debian's, unless one is there.
command -v kubectl >/dev/null || missing+=(kubernetes-client)
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

# npm packages pinned by their lock files, where the tests look: @grafana/schema and TypeScript
# (//deploy/grafana), kubernetes-models, ajv and yaml (//tests:k8s_test).
npm_ci() {
  local src dir="$2"
  src="$(cd "$(dirname "$0")/../$1" && pwd)"
  if ! cmp -s "$src/package-lock.json" "$dir/package-lock.json" || [[ ! -d "$dir/node_modules" ]]; then
    echo "install_deps: npm ci in $dir"
    "${SUDO[@]}" mkdir -p "$dir"
    "${SUDO[@]}" cp "$src/package.json" "$src/package-lock.json" "$dir/"
    (cd "$dir" && "${SUDO[@]}" npm ci --no-audit --no-fund --silent)
  fi
}
npm_ci deploy/grafana/schema_check /var/cache/cohort/grafana-schema-check
npm_ci deploy/k8s/validate /var/cache/cohort/k8s-validate
