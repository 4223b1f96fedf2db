#!/usr/bin/env bash
# The training input pipeline's images a second per core (JPEG decode, RandomResizedCrop(224),
# horizontal flip, normalise) on ImageNet-sized JPEGs: Cohort's EncodedSource on N threads
# (//tools/data:image_pipeline_bench) against torchvision's ImageFolder + DataLoader with the same
# transforms on N worker processes (tools/data/bench_images.py), for N = 1 and 2, ROUNDS rounds
# (default 5) alternating which side goes first, so a noisy neighbour hits both alike. Prints
# each side's median images/s (per core: / N) and images per CPU-second the run used (steadier
# on a shared machine), their ratios, and the cores that would feed ResNet-50 on one H200 (about
# 5,000 images/s).
#   tools/data/bench_images.sh [ROUNDS]
# The images (1,600 JPEGs of 500x375 at quality 90) are written once to $BENCH_IMAGES (default
# /var/cache/cohort/bench-images). BENCH_THREADS="1 2 4" sets the N to measure, BENCH_SECONDS
# the seconds each run measures (default 10). A second Bazel server: BAZEL_BUILD="bazel
# --output_base=DIR build --symlink_prefix=/" with BAZEL_BIN=its bazel-bin.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
images=${BENCH_IMAGES:-/var/cache/cohort/bench-images}
read -ra counts <<<"${BENCH_THREADS:-1 2}"
seconds=${BENCH_SECONDS:-10}
read -ra build <<<"${BAZEL_BUILD:-bazel build}"
bin=${BAZEL_BIN:-bazel-bin}
gpu_rate=5000  # ResNet-50 training on one H200, bs 128 bf16: 4,997 img/s (docs/benchmarks.md)
# Debian's torchvision and Pillow are in the system Python, not in a virtual environment's.
python=/usr/bin/python3

if ! "$python" -c 'import torchvision, PIL' 2>/dev/null; then
  SUDO=()
  ((EUID == 0)) || SUDO=(sudo)
  echo "bench_images: installing python3-torchvision python3-pil" >&2
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
    python3-torchvision python3-pil >/dev/null
fi
"${build[@]}" //tools/data:image_pipeline_bench >&2
"$python" tools/data/bench_images.py generate --dir "$images"

# "IMAGES_A_SECOND IMAGES_A_CPU_SECOND" of a run's line: the second counts only the CPU time the
# run got, so a neighbour taking cores moves it less.
rates() {
  sed -nE 's/^[a-z]+: ([0-9.]+) images\/s.* ([0-9.]+) CPU-seconds a second$/\1 \2/p' <<<"$1" |
    awk '{printf "%s %.1f", $1, $1 / $2}'
}
run_cohort() {
  local out
  out=$("$bin/tools/data/image_pipeline_bench" --images="$images" --threads="$1" \
    --seconds="$seconds")
  echo "  $out" >&2
  rates "$out"
}
run_torchvision() {
  local out
  out=$("$python" tools/data/bench_images.py torchvision --images "$images" --workers "$1" \
    --seconds "$seconds")
  echo "  $out" >&2
  rates "$out"
}

declare -A cohort cohort_cpu torchvision torchvision_cpu
measure() {  # SIDE N: appends the run's figures to SIDE[N] and SIDE_cpu[N]
  local -a r
  read -ra r <<<"$("run_$1" "$2")"
  local -n wall=$1 cpu=$1_cpu
  wall[$2]+="${r[0]} "
  cpu[$2]+="${r[1]} "
}
for ((r = 1; r <= rounds; r++)); do
  echo "round $r" >&2
  for n in "${counts[@]}"; do
    if ((r % 2)); then
      measure cohort "$n"
      measure torchvision "$n"
    else
      measure torchvision "$n"
      measure cohort "$n"
    fi
  done
done

median() {
  tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}
echo "medians of $rounds rounds; per core = images/s / N; per CPU-s = images per CPU-second used"
printf '%3s %13s %9s %9s %18s %9s %9s %7s %13s\n' N "cohort img/s" "per core" "per CPU-s" \
  "torchvision img/s" "per core" "per CPU-s" ratio "ratio per CPU"
for n in "${counts[@]}"; do
  awk -v n="$n" -v c="$(median "${cohort[$n]}")" -v cc="$(median "${cohort_cpu[$n]}")" \
    -v t="$(median "${torchvision[$n]}")" -v tc="$(median "${torchvision_cpu[$n]}")" \
    'BEGIN {printf "%3d %13.1f %9.1f %9.1f %18.1f %9.1f %9.1f %6.2fx %12.2fx\n", n, c, c / n, cc,
            t, t / n, tc, c / t, cc / tc}'
done
# Images per CPU-second at the largest N: cores sharing memory bandwidth and caches, and a
# neighbour's load left out.
n=${counts[-1]}
awk -v n="$n" -v c="$(median "${cohort_cpu[$n]}")" -v t="$(median "${torchvision_cpu[$n]}")" \
  -v g="$gpu_rate" 'BEGIN {
    printf "ResNet-50 at %d img/s (one H200) needs %.1f cores of Cohort'\''s pipeline", g, g / c
    printf " (%.1f of torchvision'\''s), at N=%d'\''s images per CPU-second\n", g / t, n
  }'
