#!/usr/bin/env bash
# Builds the GPU binaries here and packs them, with the shared libraries the GPU machine lacks,
# into .gpu_bundle/cohort-gpu.tar.xz for tools/gpu/run.sh to run there.
#
#   tools/gpu/bundle.sh [TARGET...]
#
# Default targets: every test tagged gpu, //trainer/ops/cuda:gpu_info, //trainer/gpu:gpu_bench,
# //trainer:train_gpu, and a job's programs (launch, scheduler, shard, worker_gpu)
# (a default target that does not exist, or does not build, is skipped with a warning; a target
# named on the command line must exist). Only cc_test/cc_binary executables are bundled.
# Left out of lib/: glibc (every machine has its own) and the CUDA libraries the GPU machine's
# pip wheels provide (libcuda, cuDNN, cuBLAS, cudart, nvrtc, nvJitLink). The Python package
# (//python:cohort: libcohort.so serves any CPython 3) travels in python/ for run.sh's PyTorch
# jobs; Fashion-MNIST's files in data/ for its LeNet runs.
set -euo pipefail

case ${1:-} in -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac

cd "$(dirname "$0")/../.."
out_dir=.gpu_bundle
tarball=$out_dir/cohort-gpu.tar.xz
# The device tool carries at most 64 MiB, the checkout included.
max_bytes=$((56 * 1024 * 1024))
fashion_mnist=/usr/share/datasets/fashion-mnist
DEFAULT_EXTRA=(//trainer/ops/cuda:gpu_info //trainer/gpu:gpu_bench //trainer:train_gpu
  //tools/launch:launch //services/scheduler:scheduler //services/shard:shard
  //services/worker:worker_gpu)

warn() { echo "bundle.sh: WARNING: $*" >&2; }
die() { echo "bundle.sh: ERROR: $*" >&2; exit 1; }

# --- which targets -----------------------------------------------------------------------------
strict=0
if (($#)); then
  requested=("$@")
  strict=1
else
  mapfile -t requested < <(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
  requested+=("${DEFAULT_EXTRA[@]}")
fi

labels=()
for t in "${requested[@]}"; do
  if found=$(bazel query "$t" 2>/dev/null) && [[ -n $found ]]; then
    mapfile -t -O "${#labels[@]}" labels <<<"$found"
  elif ((strict)); then
    die "no such target: $t"
  else
    warn "skipping $t: no such target"
  fi
done
((${#labels[@]})) || die "no targets to build"

# Only C++ executables: sh/py tests are scripts the GPU machine could not run from a bundle.
cc_labels=()
kinds=()
while read -r rule _ label; do
  if [[ $rule == cc_test || $rule == cc_binary ]]; then
    cc_labels+=("$label")
    kinds+=("$rule")
  else
    warn "skipping $label: a $rule, not a cc_test/cc_binary"
  fi
done < <(bazel query --output=label_kind "set(${labels[*]})" 2>/dev/null)
((${#cc_labels[@]})) || die "no cc_test/cc_binary among the targets"

# --- build -------------------------------------------------------------------------------------
echo "bundle.sh: building ${cc_labels[*]}"
built=()
if bazel build -c opt --keep_going "${cc_labels[@]}"; then
  built=("${cc_labels[@]}")
else
  # Find out which ones failed (the rest is cached, so this is quick).
  for l in "${cc_labels[@]}"; do
    if bazel build -c opt "$l" >/dev/null 2>&1; then
      built+=("$l")
    elif ((strict)); then
      die "$l does not build"
    else
      warn "skipping $l: it does not build (see the errors above)"
    fi
  done
fi
((${#built[@]})) || die "nothing built"

# Output paths in the same configuration as the build (bazel-bin may point at another).
declare -A path_of
while IFS=$'\t' read -r label path; do
  path_of[$label]=$path
done < <(bazel cquery -c opt --output=starlark \
  --starlark:expr='str(target.label) + "\t" + (target.files_to_run.executable.path if target.files_to_run.executable else "")' \
  "set(${built[*]})" 2>/dev/null)

# --- stage -------------------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/cohort-gpu-bundle.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/cohort-gpu
mkdir -p "$stage/bin" "$stage/lib" "$stage/lib-cxx"

# Provided by every machine (glibc) or by the GPU machine's driver and pip wheels.
skip_lib='^(linux-vdso\.so|linux-gate\.so|ld-linux[^/]*|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libcudnn[^/]*|libcublas[^/]*|libcublasLt[^/]*|libcudart[^/]*|libnvrtc[^/]*|libnvJitLink[^/]*)'
: >"$stage/manifest.tsv"
declare -A have_lib
# bundle_libs FILE: the libraries FILE links into lib/ (lib-cxx/ for the C++ runtime), but those
# above. ldd on the build output itself, so the $ORIGIN runpath finds Bazel's _solib libraries.
bundle_libs() {
  local name lib path dest
  name=$(basename "$1")
  while read -r lib path; do
    [[ $lib =~ $skip_lib ]] && continue
    if [[ $path == "not found" ]]; then
      warn "$name needs $lib, which is not found here"
      continue
    fi
    [[ -n ${have_lib[$lib]:-} ]] && continue
    have_lib[$lib]=1
    case $lib in
      libstdc++.so*|libgcc_s.so*) dest=$stage/lib-cxx ;;  # run.sh uses these only if the machine's are older
      *) dest=$stage/lib ;;
    esac
    cp -L "$path" "$dest/$lib"
    chmod u+w "$dest/$lib"
  done < <(ldd "$1" | awk '
    $2 == "=>" { print $1, ($3 == "not" ? "not found" : $3); next }
    $2 ~ /^\(/ { n = $1; sub(".*/", "", n); print n, $1 }  # the loader and the vDSO')
}
for i in "${!cc_labels[@]}"; do
  label=${cc_labels[$i]}
  [[ " ${built[*]} " == *" $label "* ]] || continue
  src=${path_of[$label]:-}
  [[ -n $src && -f $src ]] || { warn "skipping $label: no output file found"; continue; }
  if [[ $(head -c4 "$src" | od -An -tx1 | tr -d ' \n') != 7f454c46 ]]; then
    warn "skipping $label: $src is not an ELF executable"
    continue
  fi
  name=${label#//}
  name=${name//[\/:]/_}
  if [[ ${label##*:} == *bench ]]; then
    kind="bench"
  elif [[ ${kinds[$i]} == cc_test ]]; then
    kind="test"
  elif [[ ${label##*:} == gpu_info ]]; then
    kind="tool"     # run first, without arguments
  else
    kind="program"  # run by hand (train_gpu) or by run.sh's distributed job
  fi
  cp -L "$src" "$stage/bin/$name"
  chmod u+w,a+rx "$stage/bin/$name"
  printf '%s\t%s\t%s\n' "$name" "$kind" "$label" >>"$stage/manifest.tsv"
  bundle_libs "$src"
done
[[ -s $stage/manifest.tsv ]] || die "no binary bundled"

# The Python package, for PyTorch jobs with CUDA tensors (the GPU machine's python3 has torch).
if ((strict == 0)) && bazel build -c opt //python:cohort; then
  mkdir -p "$stage/python/cohort"
  while read -r f; do
    cp -L "$f" "$stage/python/cohort/"
    chmod u+w "$stage/python/cohort/$(basename "$f")"
    [[ $f == *.so ]] && bundle_libs "$f"
  done < <(bazel cquery -c opt --output=starlark \
    --starlark:expr='"\n".join([f.path for f in target.files.to_list()])' //python:cohort 2>/dev/null)
else
  warn "no Python package: run.sh's PyTorch jobs do not run"
fi

cp tools/gpu/run.sh tools/gpu/torch_resnet_bench.py tools/gpu/torch_lenet_check.py \
  tools/gpu/torch_ddp_resnet.py examples/torch_mnist.py tools/gpu/kernel_table.py \
  tools/check_model.py "$stage/"
# check_model.py's modules, without their tests.
mkdir -p "$stage/numpy_model"
find tools/numpy_model -maxdepth 1 -name '*.py' ! -name '*_test.py' ! -name testing.py \
  -exec cp {} "$stage/numpy_model/" \;
# Fashion-MNIST travels too (30 MB): the GPU machine has no network to fetch it.
if [[ -d $fashion_mnist ]]; then
  mkdir -p "$stage/data/fashion-mnist"
  cp "$fashion_mnist"/*-ubyte.gz "$stage/data/fashion-mnist/"
else
  warn "no $fashion_mnist (tools/install_deps.sh installs it): run.sh trains on synthetic images only"
fi
{
  echo "cohort GPU bundle: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n)"
  echo "binaries: $(cut -f1,2 "$stage/manifest.tsv" | tr '\t\n' ': ')"
} >"$stage/bundle-info.txt"

# --- pack --------------------------------------------------------------------------------------
mkdir -p "$out_dir"
rm -f "$tarball"
tar -C "$tmp" -cf - cohort-gpu | xz -T0 -6 >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"
size=$(stat -c %s "$tarball")
echo
awk -F'\t' '{printf "  %-44s %-6s %s\n", $1, $2, $3}' "$stage/manifest.tsv"
echo "libraries: $(find "$stage/lib" "$stage/lib-cxx" -type f | wc -l) files, $(du -sh "$stage/lib" | cut -f1) + $(du -sh "$stage/lib-cxx" | cut -f1) uncompressed"
size_mib=$(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}')
echo "bundle: $tarball $((size / 1024)) KiB ($size_mib MiB)"
if ((size > max_bytes)); then
  echo "largest files:" >&2
  (cd "$stage" && du -a bin lib lib-cxx data 2>/dev/null | sort -rn | head -10) >&2
  rm -f "$tarball"
  die "the bundle is $size_mib MiB, over the $((max_bytes / 1048576)) MiB that leaves room for the checkout in a 64 MiB carry; bundle fewer targets (pass them as arguments)"
fi
