#!/usr/bin/env bash
# CPU builds stay free of the GPU libraries: the trainer and the worker name no CUDA, cuDNN or
# cuBLAS library, while the GPU benchmark does (so the check is seen to catch one).
# Usage: link_check_test.sh CPU_BINARY... -- GPU_BINARY
set -euo pipefail

gpu_libs() { readelf -d "$1" | grep -E 'NEEDED.*lib(cuda|cudnn|cublas|cudart)' || true; }

failed=0
while [[ $# -gt 0 && "$1" != "--" ]]; do
  found=$(gpu_libs "$1")
  if [[ -n "$found" ]]; then
    echo "FAIL: $1 links GPU libraries:"
    echo "$found"
    failed=1
  else
    echo "ok: $1 links no GPU library"
  fi
  shift
done
shift
if [[ -z "$(gpu_libs "$1" | grep libcudnn)" ]]; then
  echo "FAIL: $1 should link libcudnn; the check cannot see GPU libraries"
  failed=1
else
  echo "ok: $1 links libcudnn"
fi
exit $failed
