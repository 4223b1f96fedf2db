#!/usr/bin/env bash
# Runs the GPU bundle made by tools/gpu/bundle.sh on the GPU machine: gpu_info, every GPU test
# binary, a distributed job (scheduler, 2 shards, 1 worker on gpu:0; and one worker on every
# GPU where there are several); where the bundle carries Fashion-MNIST, the same job on it and
# LeNet trained alone in fp32 and bf16, each export loaded into a PyTorch LeNet and scored, and
# the PyTorch example on cohortrun with CUDA tensors and with CPU tensors; then gpu_bench (its
# cudnnFind choices logged; eager and from a CUDA graph) and the PyTorch reference over the same
# configurations (torch.compile on the first), ResNet-50 with CUDA tensors on Cohort against
# DDP over nccl, and an ncu profile of the first configuration's timed steps.
#
#   bash tools/gpu/run.sh [--tests-only | --bench-only] [--torch-compile] [--bundle FILE]
#
# From the repo root it unpacks .gpu_bundle/cohort-gpu.tar.xz; inside an unpacked bundle it uses
# that. Results go to $OUT (a temporary folder if unset): summary.txt and results.tar.gz (gtest
# XML and every log), two files because $OUT takes few. Every step runs under a timeout and
# within an overall budget, so one hang cannot use up the lease; failures are recorded, not fatal.
# Environment: GPU_RUN_MODE=all|tests|unit|bench (tests: the test binaries and the jobs; unit: the
# test binaries alone), RUN_BUDGET_S (540), STEP_TIMEOUT_S (300), BENCH_STEPS (40), BENCH_WARMUP
# (10), BENCH_CONFIGS (";"-separated "model batch precision [layout]", the first also timed with
# the loss read every step, bn+relu fused and torch.compile; default below), BUNDLE (the
# tarball), PROFILE (1: the ncu profile), PROFILE_CONFIG (";"-separated configurations it
# profiles: the first), TEST_WRAPPER (a command the test binaries run under, e.g.
# "compute-sanitizer --tool memcheck"); gtest's GTEST_FILTER applies.
# Exit status: 0 when everything ran and passed, 1 otherwise.
set -uo pipefail

mode=${GPU_RUN_MODE:-all}
torch_compile=0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle=${BUNDLE:-}
while (($#)); do
  case $1 in
    --tests-only) mode=tests ;;
    --bench-only) mode=bench ;;
    --torch-compile) torch_compile=1 ;;
    --bundle) bundle=$2; shift ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
case $mode in all|tests|unit|bench) ;; *) echo "run.sh: GPU_RUN_MODE must be all, tests, unit or bench" >&2; exit 2 ;; esac

budget=${RUN_BUDGET_S:-540}   # the device tool stops a command at 600 s
step_timeout=${STEP_TIMEOUT_S:-300}
bench_steps=${BENCH_STEPS:-40}
bench_warmup=${BENCH_WARMUP:-10}
bench_configs_env=${BENCH_CONFIGS:-}
BENCH_CONFIGS=(
  "resnet50 128 bf16"
  "resnet50 256 bf16"
  "resnet56 128 bf16"
  "resnet56 128 fp32"
  "resnet56 128 fp32 nchw"
  "lenet 256 bf16"
)
[[ -n $bench_configs_env ]] && IFS=';' read -ra BENCH_CONFIGS <<<"$bench_configs_env"

work=$(mktemp -d /tmp/cohort-gpu.XXXXXX)
if [[ -z ${OUT:-} ]]; then
  OUT=$(mktemp -d /tmp/cohort-gpu-out.XXXXXX)
  echo "OUT not set: results go to $OUT"
fi
mkdir -p "$OUT"
results=$work/results
mkdir -p "$results/tests" "$results/logs"
steps_tsv=$results/steps.tsv   # kind, name, config, rc, seconds, log, xml
: >"$steps_tsv"

# --- summary --------------------------------------------------------------------------------
write_summary() {
  python3 - "$steps_tsv" "$OUT/summary.txt" <<'PY'
import collections, os, re, sys, xml.etree.ElementTree as ET

steps_tsv, summary_path = sys.argv[1], sys.argv[2]
rows = []
with open(steps_tsv) as f:
    for line in f:
        kind, name, config, rc, secs, logf, xml = line.rstrip("\n").split("\t")
        rows.append(dict(kind=kind, name=name, config=config, rc=int(rc), secs=int(secs), log=logf, xml=xml))

def status(rc):
    return {0: "ok", -1: "not run (budget)", 124: "TIMED OUT"}.get(rc, f"FAILED rc={rc}")

def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return ["(no log)"]

out, failed_logs = [], []
total = collections.Counter()

tools = [r for r in rows if r["kind"] == "tool"]
failed_logs += [r for r in tools if r["rc"] != 0]

tests = [r for r in rows if r["kind"] == "test"]
if tests:
    out.append("")
    out.append(f"{'test binary':<48} {'pass':>5} {'fail':>5} {'skip':>5}  status")
for r in tests:
    c = collections.Counter()
    note = status(r["rc"])
    try:
        root = ET.parse(r["xml"]).getroot()
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                c["failed"] += 1
            elif (case.find("skipped") is not None or case.get("result") == "skipped"
                  or case.get("status") == "notrun"):
                c["skipped"] += 1
            else:
                c["passed"] += 1
    except (OSError, ET.ParseError):
        note += ", no gtest XML"
    if r["rc"] != 0 and c["failed"] == 0:
        c["failed"] += 1  # crashed, timed out or exited non-zero without a failing case
    if r["rc"] != 0 or c["failed"]:
        failed_logs.append(r)
    total.update(c)
    out.append(f"{r['name']:<48} {c['passed']:>5} {c['failed']:>5} {c['skipped']:>5}  {note}")

# Where a test binary crashed: the backtrace cuda-gdb took of its test run again.
for r in (r for r in rows if r["kind"] == "debug"):
    frames = [l for l in tail(r["log"], 400) if re.match(r"#\d+ ", l)]
    out.append(f"{r['name']} ({r['config']}):")
    out.extend("    " + l[:160] for l in (frames[:20] or ["(no frames)"]))

# Jobs, lone training runs and the PyTorch checks, each with the last accuracy its log gave.
jobs = [r for r in rows if r["kind"] in ("job", "train", "check")]
if jobs:
    out.append("")
for r in jobs:
    said = [l.strip() for l in tail(r["log"], 400) if re.search(r"top-?1", l)]
    out.append(f"{r['kind']} {r['name']} {r['config']}: {status(r['rc'])}"
               + (f"; {said[-1]}" if said else ""))
    if r["rc"] != 0:
        failed_logs.append(r)

benches = [r for r in rows if r["kind"] == "bench"]
bench_counts = collections.Counter()
if benches:
    configs = list(dict.fromkeys(r["config"] for r in benches))
    names = list(dict.fromkeys(r["name"] for r in benches))
    ips = {}
    for r in benches:
        val = None
        if r["rc"] == 0:
            m = re.findall(r"([0-9][0-9.,]*)\s*images/sec", "\n".join(tail(r["log"], 200)))
            if m:
                val = float(m[-1].replace(",", ""))
        ips[(r["name"], r["config"])] = val if val is not None else status(r["rc"]) if r["rc"] else "no images/sec"
        bench_counts["ok" if val is not None else "not run" if r["rc"] == -1 else "failed"] += 1
        if val is None and r["rc"] != -1:
            failed_logs.append(r)
    out.append("")
    w = {n: max(len(n), 16) for n in names}
    out.append(f"{'images/sec':<22}" + "".join(f"  {n:>{w[n]}}" for n in names))
    for cfg in configs:
        cells = []
        for n in names:
            v = ips.get((n, cfg), "-")
            cells.append(f"  {v:>{w[n]}.1f}" if isinstance(v, float) else f"  {v:>{w[n]}}")
        out.append(f"{cfg:<22}" + "".join(cells))
    # Ours against PyTorch eager and compiled where both ran.
    ours = [n for n in names if not n.startswith("torch-")]
    for ref in ("torch-eager", "torch-compile"):
        for n in ours if ref in names else []:
            ratios = [f"{cfg}: {ips[(n, cfg)] / ips[(ref, cfg)]:.2f}x"
                      for cfg in configs
                      if isinstance(ips.get((n, cfg)), float)
                      and isinstance(ips.get((ref, cfg)), float)]
            if ratios:
                out.append(f"{n} / {ref}: " + ", ".join(ratios))

for r in rows:
    if r["kind"] == "profile":
        out += ["", f"profile {r['name']} {r['config']}: {status(r['rc'])}"] + tail(r["log"], 13)
        if r["rc"] != 0:
            failed_logs.append(r)

if failed_logs:
    details = ["", "=== tails of failed steps' logs ==="]
    for r in failed_logs[:6]:
        details.append(f"--- {r['kind']} {r['name']} {r['config']} ({os.path.basename(r['log'])})")
        details += ["    " + l for l in tail(r["log"])]
    out = details + [""] + out

out.append("")
if tools:
    out.append("tools: " + ", ".join(f"{r['name']} {status(r['rc'])}" for r in tools))
if jobs:
    out.append(f"jobs, training runs and checks: {sum(r['rc'] == 0 for r in jobs)} ok of {len(jobs)}")
if benches:
    out.append(f"benchmarks: {bench_counts['ok']} ok, {bench_counts['failed']} failed, {bench_counts['not run']} not run")
out.append(f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
text = "\n".join(out) + "\n"
with open(summary_path, "w") as f:
    f.write(text)
print("\n=== summary ===\n" + text, end="")
profiles = [r for r in rows if r["kind"] == "profile"]
ok = (total["failed"] == 0 and all(r["rc"] == 0 for r in tools + jobs + profiles)
      and bench_counts["failed"] == 0 and bench_counts["not run"] == 0)
sys.exit(0 if ok else 1)
PY
  summary_rc=$?
  cp "$OUT/summary.txt" "$results/summary.txt" 2>/dev/null
}

finished=0
finish() {
  ((finished)) && return
  finished=1
  write_summary
  tar -czf "$OUT/results.tar.gz" -C "$results" . 2>/dev/null || echo "run.sh: could not write results.tar.gz" >&2
  [[ ${KEEP_WORK:-0} == 1 ]] || rm -rf "$work"
}
trap finish EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM

log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }
# Setup failures still leave a summary that says so.
fatal() {
  echo "run.sh: $*" | tee "$results/logs/setup.log" >&2
  printf 'tool\tsetup\t\t1\t0\t%s\t\n' "$results/logs/setup.log" >>"$steps_tsv"
  exit 1
}

# --- the bundle -----------------------------------------------------------------------------
if [[ -z $bundle && -f $here/manifest.tsv && -d $here/bin ]]; then
  root=$here   # run.sh inside an unpacked bundle
else
  if [[ -z $bundle ]]; then
    for c in "$PWD/.gpu_bundle/cohort-gpu.tar.xz" "$here/../../.gpu_bundle/cohort-gpu.tar.xz"; do
      [[ -f $c ]] && { bundle=$c; break; }
    done
  fi
  if [[ -z $bundle || ! -f $bundle ]]; then
    fatal "no bundle found (make one with tools/gpu/bundle.sh and carry .gpu_bundle)"
  fi
  # Python's tarfile is the fallback where tar has no xz.
  tar -xJf "$bundle" -C "$work" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle" "$work" ||
    fatal "cannot unpack $bundle"
  root=$work/cohort-gpu
fi
[[ -f $root/bundle-info.txt ]] && tee "$results/bundle-info.txt" <"$root/bundle-info.txt"
# The checkout's copy of the PyTorch script is the newer one where both exist.
script_of() { if [[ -f $here/$1 ]]; then echo "$here/$1"; else echo "$root/$1"; fi; }
torch_script=$(script_of torch_resnet_bench.py)
lenet_check=$(script_of torch_lenet_check.py)
kernel_table=$(script_of kernel_table.py)

# --- library path for the bundled binaries ---------------------------------------------------
# The GPU machine's cuDNN/cuBLAS/CUDA runtime come from its pip wheels (cuDNN loads sub-libraries
# at run time, so they must be on the search path, not just next to the binary). Python itself
# keeps its own environment: the bundle's libraries are only for the bundled binaries.
gpu_lib_dirs=$(python3 - <<'PY' 2>/dev/null
import glob, importlib.util, os
dirs = []
def add(d):
    if os.path.isdir(d) and d not in dirs and glob.glob(os.path.join(d, "lib*.so*")):
        dirs.append(d)
def spec_dirs(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return []
    return list(spec.submodule_search_locations or []) if spec else []
for mod in ("nvidia.cudnn", "nvidia.cublas", "nvidia.cuda_runtime", "nvidia.cuda_nvrtc", "nvidia.nvjitlink"):
    for p in spec_dirs(mod):
        add(os.path.join(p, "lib"))
# CUDA 13 wheels put several libraries under nvidia/cu13/lib; search every nvidia/*/lib.
for p in spec_dirs("nvidia"):
    for d in sorted(glob.glob(os.path.join(p, "*", "lib")) + glob.glob(os.path.join(p, "*", "lib64"))):
        add(d)
for p in spec_dirs("torch"):
    add(os.path.join(p, "lib"))
print(":".join(dirs))
PY
)
bin_ld_path=$root/lib
# libstdc++/libgcc_s travel in lib-cxx and are used only where the machine's own are older.
if [[ -d $root/lib-cxx ]]; then
  use_cxx=$(python3 - "$root/lib-cxx/libstdc++.so.6" <<'PY' 2>/dev/null
import re, subprocess, sys
def newest(path):
    try:
        data = open(path, "rb").read()
    except OSError:
        return -1
    return max((int(v) for v in re.findall(rb"GLIBCXX_3\.4\.(\d+)", data)), default=-1)
system = ""
out = ""
for exe in ("/sbin/ldconfig", "ldconfig"):
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True).stdout
        break
    except OSError:
        pass
for line in out.splitlines():
    if "libstdc++.so.6 " in line and "x86-64" in line:
        system = line.split("=>")[-1].strip()
        break
print(1 if newest(system) < newest(sys.argv[1]) else 0)
PY
  )
  [[ ${use_cxx:-1} == 1 ]] && bin_ld_path+=:$root/lib-cxx
fi
[[ -n $gpu_lib_dirs ]] && bin_ld_path+=:$gpu_lib_dirs
[[ -n ${LD_LIBRARY_PATH:-} ]] && bin_ld_path+=:$LD_LIBRARY_PATH
{
  echo "bundled libstdc++ used: ${use_cxx:-n/a}"
  echo "LD_LIBRARY_PATH for bundled binaries:"
  tr ':' '\n' <<<"$bin_ld_path" | sed 's/^/  /'
} | tee "$results/logs/environment.log"

# --- steps ----------------------------------------------------------------------------------
# run_step KIND NAME CONFIG LOG XML -- CMD...: runs CMD under a timeout cut to the budget left and
# appends one line to steps.tsv (rc 124: timed out; rc -1: not run, the budget was spent).
run_step() {
  local kind=$1 name=$2 config=$3 logf=$4 xml=$5
  shift 6
  local left=$((budget - SECONDS - 15)) t rc start
  if ((left < 20)); then
    log "SKIP $kind $name${config:+ $config}: time budget spent"
    printf '%s\t%s\t%s\t-1\t0\t%s\t%s\n' "$kind" "$name" "$config" "$logf" "$xml" >>"$steps_tsv"
    return
  fi
  t=$((left < step_timeout ? left : step_timeout))
  start=$SECONDS
  timeout --kill-after=10 "$t" "$@" >"$logf" 2>&1
  rc=$?
  ((rc == 137)) && rc=124
  log "$kind $name${config:+ $config}: rc=$rc ($((SECONDS - start)) s)$( ((rc == 124)) && echo " TIMED OUT after $t s")"
  printf '%s\t%s\t%s\t%d\t%d\t%s\t%s\n' "$kind" "$name" "$config" "$rc" "$((SECONDS - start))" "$logf" "$xml" >>"$steps_tsv"
}

# Bundled binaries by kind, from the manifest (name, kind, label).
names_of() { awk -F'\t' -v k="$1" '$2 == k {print $1}' "$root/manifest.tsv"; }

log "nvidia-smi -L"
timeout 30 nvidia-smi -L 2>&1 | tee "$results/logs/nvidia-smi.log" || echo "(nvidia-smi failed)"

# Libraries no folder provides show up here before any test fails obscurely.
: >"$results/logs/missing-libs.log"
for b in "$root"/bin/*; do
  LD_LIBRARY_PATH=$bin_ld_path ldd "$b" 2>&1 | grep 'not found' | sed "s|^|$(basename "$b"): |" >>"$results/logs/missing-libs.log"
done
[[ -s $results/logs/missing-libs.log ]] && { echo "missing libraries:"; cat "$results/logs/missing-libs.log"; }

for t in $(names_of tool); do
  run_step tool "$t" "" "$results/logs/$t.log" "" -- env LD_LIBRARY_PATH="$bin_ld_path" "$root/bin/$t"
  cat "$results/logs/$t.log"
done

if [[ $mode != bench ]]; then
  export TEST_TMPDIR=$work/test_tmp
  for t in $(names_of test); do
    mkdir -p "$TEST_TMPDIR"
    run_step test "$t" "" "$results/logs/$t.log" "$results/tests/$t.xml" -- \
      env LD_LIBRARY_PATH="$bin_ld_path" ${TEST_WRAPPER:-} "$root/bin/$t" \
      --gtest_output="xml:$results/tests/$t.xml"
    # Killed by a signal (run_step reports SIGKILL, a timeout's, as 124): the test that was
    # running, again under cuda-gdb for a backtrace.
    rc=$(tail -n1 "$steps_tsv" | cut -f4)
    crashed=
    ((rc > 128)) &&
      crashed=$(grep -o '^\[ RUN      \] [^ ]*' "$results/logs/$t.log" | tail -n1 | cut -c14-)
    if [[ -n $crashed ]] && command -v cuda-gdb >/dev/null; then
      run_step debug "$t backtrace" "$crashed" "$results/logs/$t.backtrace.log" "" -- \
        env LD_LIBRARY_PATH="$bin_ld_path" cuda-gdb -batch -ex run -ex bt -ex quit --args \
        "$root/bin/$t" --gtest_filter="$crashed"
      grep -E '^#[0-9]+ ' "$results/logs/$t.backtrace.log" | head -n 20
    fi
    rm -rf "$TEST_TMPDIR"
  done
  unset TEST_TMPDIR
fi

# A distributed dist_sync job of the bundled programs, LeNet on synthetic images in bf16.
bin_of() { awk -F'\t' -v l="$1" '$3 == l {print $1}' "$root/manifest.tsv"; }
launch_bin=$(bin_of //tools/launch:launch)
scheduler_bin=$(bin_of //services/scheduler:scheduler)
shard_bin=$(bin_of //services/shard:shard)
worker_bin=$(bin_of //services/worker:worker_gpu)
# The bundled Python package's cohortrun, with the bundled launcher, scheduler and shard:
# run_cohortrun KIND NAME CONFIG LOG COHORTRUN_ARGS...
have_cohortrun=0
[[ -d $root/python/cohort && -n $launch_bin && -n $scheduler_bin && -n $shard_bin ]] &&
  have_cohortrun=1
run_cohortrun() {
  local kind=$1 name=$2 config=$3 log_file=$4
  shift 4
  run_step "$kind" "$name" "$config" "$log_file" "" -- \
    env PYTHONUNBUFFERED=1 PYTHONPATH="$root/python" LD_LIBRARY_PATH="$bin_ld_path" \
    COHORT_LAUNCH="$root/bin/$launch_bin" python3 -m cohort.run \
    --scheduler_binary="$root/bin/$scheduler_bin" --shard_binary="$root/bin/$shard_bin" "$@"
}
if [[ $mode == all || $mode == tests ]]; then
  data_dir=$root/data/fashion-mnist
  [[ -d $data_dir ]] || log "no Fashion-MNIST in the bundle: LeNet trains on synthetic images only"
  if [[ -n $launch_bin && -n $scheduler_bin && -n $shard_bin && -n $worker_bin ]]; then
    # A dist_sync job, scheduler and 2 shards, 1 GPU worker: job NAME DETAIL LOG WORKER_FLAGS...
    job() {
      local name=$1 detail=$2 log_file=$3
      shift 3
      run_step job "$name" "$detail" "$log_file" "" -- \
        env LD_LIBRARY_PATH="$bin_ld_path" "$root/bin/$launch_bin" -n 1 -s 2 \
        --scheduler_binary="$root/bin/$scheduler_bin" --shard_binary="$root/bin/$shard_bin" \
        --worker_binary="$root/bin/$worker_bin" -- "$@"
    }
    gpu_count=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    job_devices=(gpu:0)
    ((gpu_count > 1)) && job_devices+=("gpu:$(seq -s, 0 $((gpu_count - 1)))")
    for d in "${job_devices[@]}"; do
      job "dist_sync W1 S2" "$d" "$results/logs/job_${d//[:,]/_}.log" \
        --devices "$d" --precision bf16 --model lenet --dataset synthetic:1x28x28:10 \
        --epochs 3 --batch_size 256 --output "$work/job_model.safetensors"
    done
    if [[ -d $data_dir ]]; then
      job "dist_sync W1 S2 fashion-mnist" "gpu:0 bf16" "$results/logs/job_fashion.log" \
        --devices gpu:0 --precision bf16 --model lenet --dataset fashion-mnist \
        --data_dir "$data_dir" --epochs 3 --output "$work/job_lenet.safetensors"
    fi
  else
    log "no job programs in the bundle: the distributed job does not run"
  fi
  train_bin=$(bin_of //trainer:train_gpu)
  if [[ -d $data_dir && -n $train_bin ]]; then
    # The README's LeNet run (10 epochs, defaults) alone on the GPU; its export in PyTorch.
    for prec in fp32 bf16; do
      run_step train "lenet fashion-mnist" "gpu:0 $prec" "$results/logs/train_lenet_$prec.log" "" -- \
        env LD_LIBRARY_PATH="$bin_ld_path" "$root/bin/$train_bin" --devices gpu:0 \
        --precision "$prec" --model lenet --dataset fashion-mnist --data_dir "$data_dir" \
        --epochs 10 --output "$work/lenet_$prec.safetensors"
      run_step check "torch load_state_dict" "lenet $prec" "$results/logs/torch_lenet_$prec.log" "" -- \
        env PYTHONUNBUFFERED=1 python3 "$lenet_check" "$work/lenet_$prec.safetensors" --data_dir "$data_dir"
    done
  fi
  # The README's PyTorch example through the bundled package: 2 workers with CUDA tensors and
  # 2 with CPU tensors, one epoch each; their test accuracies within a point.
  if [[ -d $data_dir && $have_cohortrun == 1 ]]; then
    for dev in cuda cpu; do
      run_cohortrun job "cohortrun torch_mnist" "W2 S2 $dev" "$results/logs/torch_mnist_$dev.log" \
        -np 2 -s 2 python3 "$(script_of torch_mnist.py)" --data_dir "$data_dir" --epochs 1 \
        --device "$dev"
    done
    run_step check "torch_mnist cuda vs cpu" "top-1 within 1 point" \
      "$results/logs/torch_mnist_compare.log" "" -- python3 -c '
import re, sys
top1 = [float(re.findall(r"test top-1 ([0-9.]+)%", open(f).read())[-1]) for f in sys.argv[1:]]
print(f"test top-1 cuda {top1[0]:.2f}% cpu {top1[1]:.2f}%")
sys.exit(abs(top1[0] - top1[1]) > 1.0)' "$results/logs/torch_mnist_cuda.log" \
      "$results/logs/torch_mnist_cpu.log"
  fi
fi

if [[ $mode == all || $mode == bench ]]; then
  benches=$(names_of bench)
  [[ -z $benches ]] && log "no benchmark binary in the bundle: only PyTorch runs"
  # Ours and PyTorch's per configuration, so a spent budget still leaves pairs to compare.
  for c in "${BENCH_CONFIGS[@]}"; do
    read -r model bs prec layout <<<"$c"
    layout=${layout:-nhwc}
    cfg="$model bs=$bs $prec${layout/nhwc/}"
    tag="${model}_bs${bs}_${prec}_$layout"
    first=0
    [[ $c == "${BENCH_CONFIGS[0]}" ]] && first=1
    # One run of ours: bench BINARY VARIANT FLAGS... (VARIANT names it in the table).
    bench() {
      local b=$1 variant=$2
      shift 2
      run_step bench "$b$variant" "$cfg" "$results/logs/${b}${variant//[+-]/_}_$tag.log" "" -- \
        env LD_LIBRARY_PATH="$bin_ld_path" "$root/bin/$b" --model="$model" --batch_size="$bs" \
        --precision="$prec" --layout="$layout" --steps="$bench_steps" --warmup="$bench_warmup" "$@"
    }
    for b in $benches; do
      COHORT_CUDNN_FIND_LOG=1 bench "$b" ""
      # The step launched whole from a CUDA graph (fp16's loss scaling waits for the GPU).
      [[ $prec != fp16 ]] && bench "$b" +graph --cuda_graph
      ((first)) || continue
      # What waiting for each step's loss (as the trainer does) costs.
      bench "$b" +loss-read --read_loss_every_step
      # What fusing batch norm's ReLU in cuDNN (16-bit, channels last) gains.
      [[ $prec != fp32 && $prec != tf32 && $layout == nhwc ]] &&
        bench "$b" +unfused --nofuse_bn_relu
    done
    torch_modes=(eager)
    # torch.compile takes minutes to compile: the first configuration only.
    ((torch_compile && first)) && torch_modes+=(compile)
    [[ $model == lenet ]] && torch_modes=()  # not a model of torch_resnet_bench.py
    torch_layout=()
    [[ $layout == nchw ]] && torch_layout=(--no_channels_last)
    for m in "${torch_modes[@]}"; do
      run_step bench "torch-$m" "$cfg" "$results/logs/torch_${m}_$tag.log" "" -- \
        env PYTHONUNBUFFERED=1 python3 "$torch_script" --model "$model" --batch_size "$bs" \
        --precision "$prec" --mode "$m" --steps "$bench_steps" --warmup "$bench_warmup" \
        "${torch_layout[@]}"
    done
  done

  # ResNet-50 with CUDA tensors on Cohort (one worker, 2 shards) against DDP over nccl, twice
  # each, alternated.
  if [[ $have_cohortrun == 1 ]]; then
    ddp_script=$(script_of torch_ddp_resnet.py)
    for rep in 1 2; do
      run_step bench torch-ddp-nccl "resnet50 bs=64 bf16 (torch)" \
        "$results/logs/torch_ddp_resnet_ddp_$rep.log" "" -- \
        env PYTHONUNBUFFERED=1 python3 "$ddp_script" --mode ddp
      run_cohortrun bench cohort-torch "resnet50 bs=64 bf16 (torch)" \
        "$results/logs/torch_ddp_resnet_cohort_$rep.log" -np 1 -s 2 python3 "$ddp_script" \
        --mode cohort
    done
  fi

  # GPU time by kernel over timed steps alone (gpu_bench turns profiling on after its warm-up).
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  b=$(names_of bench | head -1)
  profile_configs=()
  IFS=';' read -ra profile_configs <<<"${PROFILE_CONFIG:-${BENCH_CONFIGS[0]}}"
  for pc in "${profile_configs[@]}"; do
    [[ ${PROFILE:-1} == 1 && -n $ncu && -n $b ]] || break
    read -r model bs prec layout <<<"$pc"
    layout=${layout:-nhwc}
    profile_steps=3
    tag="${model}_bs${bs}_${prec}_$layout"
    run_step profile ncu "$model bs=$bs $prec $layout, $profile_steps steps" \
      "$results/logs/profile_$tag.log" "" -- \
      bash -c '"$1" --clock-control none --profile-from-start off --metrics gpu__time_duration.sum \
          --print-summary per-kernel --csv "${@:4}" >"$2.csv" && python3 "$3" "$2.csv" --steps '"$profile_steps" \
      _ "$ncu" "$results/logs/profile_$tag" "$kernel_table" env LD_LIBRARY_PATH="$bin_ld_path" \
      "$root/bin/$b" --model="$model" --batch_size="$bs" --precision="$prec" --layout="$layout" \
      --steps="$profile_steps" --warmup=3
  done
fi

summary_rc=1
finish
exit "$summary_rc"
