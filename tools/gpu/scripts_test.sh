#!/usr/bin/env bash
# scripts_test.sh BUNDLE_SH RUN_SH TORCH_BENCH_PY
set -euo pipefail
bundle_sh=$1 run_sh=$2 torch_py=$3

bash -n "$bundle_sh"
bash -n "$run_sh"
# Compiled into the test's scratch folder: the runfiles tree is not ours to write.
/usr/bin/python3 -c 'import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' \
  "$torch_py" "${TEST_TMPDIR:-/tmp}/torch_resnet_bench.pyc"

bash "$bundle_sh" --help | grep -q 'cohort-gpu.tar.xz'
bash "$run_sh" --help | grep -q -- '--tests-only'
/usr/bin/python3 "$torch_py" --help | grep -q -- '--precision'
echo "scripts ok"
