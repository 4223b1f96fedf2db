#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# (--config=fuzz, in a Bazel output folder of its own so the regular build's cache stays), then
# runs each for SECONDS (default 60) on a copy of its corpus, replayed first. A crash, leak or
# sanitizer report fails the target; its input is kept under fuzz-artifacts/ to be added to
# fuzz/corpus/<target>/ once fixed. With FUZZ_REPORT_DIR set, a JUnit file per target goes there.
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzzer.cc; do targets+=("$(basename "$f" .cc)"); done
fi
# One per checkout, as Bazel's own output base is.
output_base=${COHORT_FUZZ_OUTPUT_BASE:-/var/cache/cohort/fuzz-bazel-$(pwd | md5sum | cut -c1-12)}
mkdir -p "$(dirname "$output_base")"
bazel_fuzz() { CC=clang-14 CXX=clang++-14 bazel --output_base="$output_base" "$@"; }
export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14  # names the frames of a report
labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:$t"); done
# No bazel-* links: they stay the regular build's (tools/test.sh counts its bazel-testlogs).
if ! bazel_fuzz build --config=fuzz --symlink_prefix=/ "${labels[@]}"; then
  echo "fuzz: the build failed"
  bazel_fuzz shutdown
  exit 1
fi
bin=$(bazel_fuzz info --config=fuzz bazel-bin 2>/dev/null)
bazel_fuzz shutdown  # its server is not needed while the targets run
artifacts=$PWD/fuzz-artifacts
mkdir -p "$artifacts"
failed=0
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp fuzz/corpus/"$t"/* "$work"/
  log="$artifacts/$t.log"
  start=$(date +%s)
  "$bin/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/$t-" "$work" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  rm -rf "$work"
  runs=$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' || echo 0)
  if [ $rc -eq 0 ]; then
    echo "fuzz: $t: ${runs} runs in ${took} s, no crash, leak or sanitizer report"
  else
    failed=$((failed + 1))
    echo "fuzz: $t: FAILED after ${took} s (exit $rc); see $log"
    grep -m5 'ERROR\|runtime error\|SUMMARY\|Test unit written' "$log" | sed 's/^/fuzz:   /'
  fi
  if [ -n "${FUZZ_REPORT_DIR:-}" ]; then
    mkdir -p "$FUZZ_REPORT_DIR"
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo "<testsuite name=\"fuzz\" tests=\"1\"><testcase name=\"$t\" time=\"$took\">"
      [ $rc -ne 0 ] && echo "<failure message=\"exit $rc; see $log\"/>"
      echo '</testcase></testsuite>'
    } >"$FUZZ_REPORT_DIR/$t.xml"
  fi
done
exit $(( failed > 0 ))
