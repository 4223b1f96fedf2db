#!/usr/bin/env bash
# A/B of the parameter-server data path in one sitting: alternates two builds' scheduler, shard
# and ps_worker (each BUILD_DIR holds those three binaries and the launcher, `launch`) over the
# same jobs and prints each run's median round.
#   tools/bench/ab_ps.sh BEFORE_DIR AFTER_DIR [PAIRS]
# Make a BUILD_DIR from a checkout with:
#   bazel build //tools/launch //services/scheduler //services/shard //tools/bench:ps_worker
#   mkdir DIR && cp bazel-bin/tools/launch/launch bazel-bin/services/scheduler/scheduler \
#     bazel-bin/services/shard/shard bazel-bin/tools/bench/ps_worker DIR/
set -euo pipefail
a=$(cd "$1" && pwd) b=$(cd "$2" && pwd) pairs=${3:-4}
cases=("1 1 --tensors=25 --tensor_bytes=4000000 --warmup=2 --rounds=10"
       "1 1 --tensors=100 --tensor_bytes=1048576 --warmup=2 --rounds=10"
       "1 1 --tensors=1000 --tensor_bytes=4096 --warmup=5 --rounds=50"
       "2 2 --tensors=25 --tensor_bytes=4000000 --warmup=2 --rounds=10"
       "2 2 --tensors=100 --tensor_bytes=1048576 --warmup=2 --rounds=10"
       "2 2 --tensors=1000 --tensor_bytes=4096 --warmup=5 --rounds=50")
run() {  # DIR W S ARGS...: the median round of rank 0, in ms
  local dir=$1 w=$2 s=$3; shift 3
  "$dir/launch" -n "$w" -s "$s" --scheduler_binary "$dir/scheduler" --shard_binary "$dir/shard" \
    -- "$dir/ps_worker" "$@" 2>&1 | sed -n 's/^\[worker 0\] ps_worker: .* median_ms \([0-9.]*\) .*/\1/p'
}
printf '%-6s %-52s %s\n' build case "median round (ms) per run"
for c in "${cases[@]}"; do
  read -r w s args <<<"$c"
  ra=() rb=()
  for ((i = 0; i < pairs; i++)); do
    ra+=("$(run "$a" "$w" "$s" $args)")
    rb+=("$(run "$b" "$w" "$s" $args)")
  done
  printf '%-6s %-52s %s\n' A "W$w S$s $args" "${ra[*]}" B "W$w S$s $args" "${rb[*]}"
done
