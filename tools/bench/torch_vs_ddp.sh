#!/usr/bin/env bash
# The PyTorch example's epoch time (LeNet on Fashion-MNIST, batch 32 per worker, 1 epoch) under
# Cohort with 2 workers started by cohortrun (2 shards, and 1; gradients averaged by the shards, or the shards
# running SGD) against the same script under torch.distributed DDP over gloo with 2 processes,
# and alone with the global batch; ROUNDS rounds (default 3), the jobs interleaved so a noisy
# neighbour hits all alike. Prints each job's epoch times, their median and test top-1.
#   tools/bench/torch_vs_ddp.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
bazel build --config=ci //python:cohort //tools:launch //services:scheduler //services:shard >&2
export PYTHONPATH="$PWD/bazel-bin/python" COHORT_LAUNCH="$PWD/bazel-bin/tools/launch/launch"
python=/usr/bin/python3
cohortrun="$python -m cohort.run"
example="$PWD/examples/torch_mnist.py"
flags=(--epochs 1 --batch_size 32)
declare -A command=(
  ["cohort W=2 S=2 averaged"]="$cohortrun -np 2 -s 2 python $example ${flags[*]}"
  ["cohort W=2 S=2 server SGD"]="$cohortrun -np 2 -s 2 python $example ${flags[*]} --server_optimizer"
  ["cohort W=2 S=1 averaged"]="$cohortrun -np 2 -s 1 python $example ${flags[*]}"
  ["DDP gloo W=2"]="$python tools/bench/torch_ddp_mnist.py -W 2 -- ${flags[*]}"
  ["alone, batch 64"]="$python $example --kv_store none --epochs 1 --batch_size 64"
)
order=("cohort W=2 S=2 averaged" "cohort W=2 S=2 server SGD" "cohort W=2 S=1 averaged"
       "DDP gloo W=2" "alone, batch 64")
declare -A times top1
for ((r = 1; r <= rounds; r++)); do
  for job in "${order[@]}"; do
    line=$(${command[$job]} 2>&1 | grep -E "Epoch 0: " | tail -1)
    [[ -n $line ]] || { echo "torch_vs_ddp: $job printed no epoch" >&2; exit 1; }
    times[$job]+="$(sed -E 's/.*Epoch 0: ([0-9.]+) s.*/\1/' <<<"$line") "
    top1[$job]=$(sed -E 's/.*top-1 ([0-9.]+)%.*/\1/' <<<"$line")
  done
done
printf '%-28s %-22s %8s %8s\n' job "epoch seconds" median top-1
for job in "${order[@]}"; do
  median=$(tr ' ' '\n' <<<"${times[$job]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-28s %-22s %8s %7s%%\n' "$job" "${times[$job]}" "$median" "${top1[$job]}"
done
