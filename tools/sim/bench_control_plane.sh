#!/usr/bin/env bash
# The control plane at N workers: a real scheduler (plaintext, on 127.0.0.1) of an elastic job
# and member_sim playing N workers and S shards (one worker killed, one joining), for each N;
# one member_sim line each.
#   bazel build //services:scheduler //tools/sim:member_sim
#   tools/sim/bench_control_plane.sh bazel-bin/services/scheduler/scheduler \
#     bazel-bin/tools/sim/member_sim [SHARDS] [N...]
set -euo pipefail
scheduler=$1 sim=$2 shards=${3:-64}
shift $(( $# > 2 ? 3 : 2 ))
sizes=("${@:-64 256 1024}")
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for n in ${sizes[@]}; do
  rm -f "$dir/port"
  "$scheduler" --insecure --bind=127.0.0.1 --num_workers="$n" --num_shards="$shards" \
    --on_worker_failure=elastic --min_workers=1 --max_workers=$((n + 1)) \
    --port_file="$dir/port" --job_id="control-plane-$n" >"$dir/scheduler.log" 2>&1 &
  pid=$!
  while [ ! -s "$dir/port" ]; do sleep 0.05; done
  "$sim" --scheduler="127.0.0.1:$(cat "$dir/port")" --workers="$n" --shards="$shards" \
    --scheduler_pid="$pid" --idle_s=5 --elastic
  wait "$pid"
  pid=
done
