#!/usr/bin/env bash
# A/B of two sets of worker flags on the same local job (launch -n W -s S), alternated in one
# sitting: each run's epoch time, images/sec and rank 0's mean Comm%. Leading NAME=VALUE words
# of a set are the launcher's environment instead (e.g. "OMP_WAIT_POLICY=passive"), and words
# launch:FLAG the launcher's flags (e.g. "launch:--shard_replicas=2").
#   tools/bench/ab_job.sh "--fusion_bytes=0" "" 3 -- --model resnet20 \
#       --dataset synthetic-cifar10 --train_samples 10240 --epochs 1
# Environment: W, S (default 2 and 2); LAUNCH (default bazel-bin/tools/launch/launch).
set -euo pipefail
a=$1 b=$2 pairs=$3
shift 3
[ "${1:-}" = "--" ] && shift
common=("$@")
launch=${LAUNCH:-bazel-bin/tools/launch/launch}
run() {  # [NAME=VALUE...] FLAGS: "s/epoch img/s Comm%" of rank 0
  local env=() launch_flags=() flags=() word
  for word in $1; do
    if [[ ${#flags[@]} -eq 0 && $word =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then env+=("$word")
    elif [[ $word == launch:* ]]; then launch_flags+=("${word#launch:}")
    else flags+=("$word"); fi
  done
  env "${env[@]}" "$launch" -n "${W:-2}" -s "${S:-2}" "${launch_flags[@]}" -- "${common[@]}" \
    --output= "${flags[@]}" 2>&1 | awk '
    /\[worker 0\] +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.e-]+ +[0-9.]+ +[0-9a-z-]+$/ { comm += $(NF-1); rows++ }
    /\[worker 0\] Test top-1/ { for (i = 1; i <= NF; i++) { if ($i == "s/epoch,") t = $(i-1); if ($i == "img/s" && v == "") v = $(i-1) } }
    END { printf "%s s/epoch %s img/s Comm%% %.1f\n", t, v, rows ? comm / rows : 0 }'
}
for ((i = 0; i < pairs; i++)); do
  echo "A [$a]: $(run "$a" "$@")"
  echo "B [$b]: $(run "$b" "$@")"
done
