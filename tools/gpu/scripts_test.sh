#!/usr/bin/env bash
# scripts_test.sh BUNDLE_SH RUN_SH TORCH_BENCH_PY TORCH_LENET_CHECK_PY KERNEL_TABLE_PY
set -euo pipefail
bundle_sh=$1 run_sh=$2 torch_py=$3 lenet_py=$4 table_py=$5
tmp=${TEST_TMPDIR:-$(mktemp -d)}

bash -n "$bundle_sh"
bash -n "$run_sh"
# Compiled into the test's scratch folder: the runfiles tree is not ours to write.
for py in "$torch_py" "$lenet_py" "$table_py"; do
  /usr/bin/python3 -c 'import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' \
    "$py" "$tmp/$(basename "$py")c"
done

bash "$bundle_sh" --help | grep -q 'cohort-gpu.tar.xz'
bash "$run_sh" --help | grep -q -- '--tests-only'
/usr/bin/python3 "$torch_py" --help | grep -q -- '--precision'
/usr/bin/python3 "$lenet_py" --help | grep -q -- '--data_dir'

# Two launches of one kernel (in ns and in us) and one of another: 4 + 2 ms and 2 ms, over 2 steps;
# names lose their argument lists only.
cat >"$tmp/ncu.csv" <<'CSV'
==PROF== Connected to process 1
cohort resnet50 bs=128 bf16 nhwc: 1.0 images/sec
"Process ID","Process Name","Host Name","Kernel Name","Block Size","Grid Size","Device","CC","Invocations","Section Name","Metric Name","Metric Unit","Minimum","Maximum","Average"
"1","b","h","void big<float>(const float *, long)","(256, 1, 1)","(8, 1, 1)","0","9.0","2","m","gpu__time_duration.sum","ns","1,000,000.00","3,000,000.00","2,000,000.00"
"1","b","h","void big<float>(const float *, long)","(256, 1, 1)","(4, 1, 1)","0","9.0","1","m","gpu__time_duration.sum","us","2,000.00","2,000.00","2,000.00"
"1","b","h","void c::(anonymous namespace)::small<(int)2>(int)","(32, 1, 1)","(1, 1, 1)","0","9.0","4","m","gpu__time_duration.sum","ns","500,000.00","500,000.00","500,000.00"
CSV
table=$(/usr/bin/python3 "$table_py" "$tmp/ncu.csv" --steps 2)
echo "$table"
grep -q '^GPU time 8.00 ms in 2 kernels, 4.00 ms per step$' <<<"$table"
grep -Eq '^ +6.00 ms +75.0%  void big<float>$' <<<"$table"
grep -Eq '^ +2.00 ms +25.0%  void c::\(anonymous namespace\)::small<\(int\)2>$' <<<"$table"
if /usr/bin/python3 "$table_py" "$bundle_sh" 2>/dev/null; then
  echo "kernel_table.py accepted a file with no kernel rows" >&2
  exit 1
fi
echo "scripts ok"
