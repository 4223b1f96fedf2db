#!/usr/bin/env bash
# Barriers alone: a real scheduler (plaintext, on 127.0.0.1) and member_sim playing N workers and
# 64 shards, timing ROUNDS barriers of every worker (no idle phase, no elastic changes), PER_HOST
# workers on each simulated host (1: each alone, every worker calling the scheduler), then
# IDLE_S seconds of heartbeats only (the idle scheduler's CPU; 0: none). One member_sim line;
# run two builds (or two PER_HOST) one after the other for an A/B.
#   bazel build //services:scheduler //tools/sim:member_sim
#   tools/sim/bench_barriers.sh bazel-bin/services/scheduler/scheduler \
#     bazel-bin/tools/sim/member_sim [N] [ROUNDS] [PER_HOST] [IDLE_S]
set -euo pipefail
scheduler=$1 sim=$2 n=${3:-1024} rounds=${4:-20} per_host=${5:-8} idle_s=${6:-0}
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$scheduler" --insecure --bind=127.0.0.1 --num_workers="$n" --num_shards=64 \
  --port_file="$dir/port" --job_id="barriers-$n" >"$dir/scheduler.log" 2>&1 &
pid=$!
while [ ! -s "$dir/port" ]; do sleep 0.05; done
"$sim" --scheduler="127.0.0.1:$(cat "$dir/port")" --workers="$n" --shards=64 \
  --scheduler_pid="$pid" --idle_s="$idle_s" --barriers="$rounds" --workers_per_host="$per_host"
wait "$pid"
pid=
