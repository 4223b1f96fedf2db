#!/usr/bin/env bash
# The control plane at N workers: a real scheduler (plaintext, on 127.0.0.1) of an elastic job
# and member_sim playing N workers and S shards (one worker killed, one joining, one hanging in
# a process of its own), for each N; then, with SHARD_BINARY set, the same N workers running
# 20 counting dist_sync steps against 2 real shard processes (their memory per worker stream).
# One member_sim line each.
#   bazel build //services:scheduler //services:shard //tools/sim:member_sim
#   SHARD_BINARY=bazel-bin/services/shard/shard tools/sim/bench_control_plane.sh \
#     bazel-bin/services/scheduler/scheduler bazel-bin/tools/sim/member_sim [SHARDS] [N...]
set -euo pipefail
scheduler=$1 sim=$2 shards=${3:-64}
shift $(( $# > 2 ? 3 : 2 ))
sizes=("${@:-64 256 1024}")
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT
start_scheduler() {  # N SHARDS FLAGS...: starts it, sets $pid, $address and $http
  local n=$1 s=$2
  shift 2
  rm -f "$dir/port" "$dir/http"
  "$scheduler" --insecure --bind=127.0.0.1 --num_workers="$n" --num_shards="$s" \
    --port_file="$dir/port" --metrics_port_file="$dir/http" --job_id="control-plane-$n" "$@" \
    >"$dir/scheduler.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  while [ ! -s "$dir/port" ] || [ ! -s "$dir/http" ]; do sleep 0.05; done
  address="127.0.0.1:$(cat "$dir/port")"
  http="127.0.0.1:$(cat "$dir/http")"
}
for n in ${sizes[@]}; do
  start_scheduler "$n" "$shards" --on_worker_failure=elastic --min_workers=1 \
    --max_workers=$((n + 1))
  "$sim" --scheduler="$address" --workers="$n" --shards="$shards" --scheduler_pid="$pid" \
    --scheduler_http="$http" --idle_s=15 --elastic --hang
  wait "$pid"
done
[ -n "${SHARD_BINARY:-}" ] || exit 0
for n in ${sizes[@]}; do
  start_scheduler "$n" 2
  shard_pids=() shard_metrics=()
  for rank in 0 1; do
    rm -f "$dir/shard-$rank.http"
    "$SHARD_BINARY" --insecure --bind=127.0.0.1 --scheduler="$address" --rank="$rank" \
      --metrics_port_file="$dir/shard-$rank.http" >"$dir/shard-$rank.log" 2>&1 &
    shard_pids+=("$!")
    pids+=("$!")
    while [ ! -s "$dir/shard-$rank.http" ]; do sleep 0.05; done
    shard_metrics+=("127.0.0.1:$(cat "$dir/shard-$rank.http")")
  done
  "$sim" --scheduler="$address" --workers="$n" --shards=0 --scheduler_pid="$pid" --idle_s=1 \
    --barriers=5 --data_steps=20 --shard_pids="$(IFS=,; echo "${shard_pids[*]}")" \
    --shard_metrics="$(IFS=,; echo "${shard_metrics[*]}")"
  wait "$pid" "${shard_pids[@]}"
done
