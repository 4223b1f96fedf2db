#!/usr/bin/env bash
# The README's main job (launch -n 2 -s 2: two shards, two workers) against one process
# training the same model on the same machine, alternated in one sitting: s/epoch of each run
# and their ratio.
#   tools/bench/job_vs_single.sh 3 -- --model lenet --dataset fashion-mnist --epochs 2
# Environment: LAUNCH, TRAIN (default bazel-bin/tools/launch/launch, bazel-bin/trainer/train).
set -euo pipefail
pairs=$1
shift
[ "${1:-}" = "--" ] && shift
launch=${LAUNCH:-bazel-bin/tools/launch/launch}
train=${TRAIN:-bazel-bin/trainer/train}
seconds() { sed -n 's/.*Test top-1 \([0-9.]*\)%.*; \([0-9.]*\) s\/epoch.*/\2 \1/p' | tail -1; }
for ((i = 0; i < pairs; i++)); do
  read -r single single_top1 < <("$train" "$@" --output= 2>&1 | seconds)
  read -r job job_top1 < <("$launch" -n 2 -s 2 -- "$@" --output= 2>&1 | seconds)
  echo "single process ${single} s/epoch (top-1 ${single_top1}%), job ${job} s/epoch" \
    "(top-1 ${job_top1}%): $(awk -v a="$job" -v b="$single" 'BEGIN { printf "%.2f", a / b }')x"
done
