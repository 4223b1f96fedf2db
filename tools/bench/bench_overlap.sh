#!/usr/bin/env bash
# bench_overlap: the same job (LeNet on Fashion-MNIST, 2 shards + 2 workers, dist_sync, one
# epoch) with communication overlapped (--overlap, the default) and not (--nooverlap), on a
# link of limited bandwidth: the job runs in its own network namespace whose loopback is shaped
# to RATE (tc tbf), so moving parameters takes time the CPUs do not spend. Prints each run's
# epoch time and speed, then the ratio. Needs root (network namespaces).
#   bazel run //tools/bench:bench_overlap                 # RATE=1gbit
#   RATE=500mbit bazel run //tools/bench:bench_overlap
#   RATE=none bazel run //tools/bench:bench_overlap       # loopback as it is
set -euo pipefail
RATE=${RATE:-1gbit}
EPOCHS=${EPOCHS:-1}
here=$(cd "$(dirname "$0")" && pwd)
root="${RUNFILES_DIR:-$0.runfiles}/cohort"
[[ -x $root/tools/launch/launch ]] || root=$here/../..
root=$(cd "$root" && pwd)
if ((EUID != 0)); then
  echo "bench_overlap: needs root (it creates a network namespace)" >&2
  exit 2
fi
ns=cohort-overlap-$$
/usr/sbin/ip netns add "$ns"
trap '/usr/sbin/ip netns del "$ns"' EXIT
/usr/sbin/ip -n "$ns" link set lo up
if [[ $RATE != none ]]; then
  /usr/sbin/ip netns exec "$ns" /usr/sbin/tc qdisc add dev lo root tbf rate "$RATE" burst 256kb latency 20ms
fi
data_dir=/usr/share/datasets/fashion-mnist
echo "bench_overlap: LeNet, Fashion-MNIST, 2 shards + 2 workers, dist_sync, $EPOCHS epoch(s), loopback shaped to $RATE"
declare -A seconds
for mode in overlap nooverlap; do
  out=$(cd "${TMPDIR:-/tmp}" && /usr/sbin/ip netns exec "$ns" "$root/tools/launch/launch" -n 2 -s 2 \
    --scheduler_binary "$root/services/scheduler/scheduler" --shard_binary "$root/services/shard/shard" \
    --worker_binary "$root/services/worker/worker" -- --model lenet --dataset fashion-mnist \
    --data_dir "$data_dir" --epochs "$EPOCHS" --output= "--$mode" 2>&1) || { echo "$out"; exit 1; }
  line=$(grep -E '\[worker 0\] Test top-1' <<<"$out")
  seconds[$mode]=$(sed -E 's/.*; ([0-9.]+) s\/epoch.*/\1/' <<<"$line")
  comm=$(grep -E '^\[worker 0\] +[0-9]+ +[0-9]+ ' <<<"$out" | awk '{s += $(NF-1); n++} END {printf "%.1f", s / n}')
  printf '  --%-9s %s  (mean Comm%% %s)\n' "$mode" "${line#\[worker 0\] }" "$comm"
done
awk -v a="${seconds[overlap]}" -v b="${seconds[nooverlap]}" \
  'BEGIN {printf "  epoch time with overlap / without: %.2f (%.1f s vs %.1f s)\n", a / b, a, b}'
