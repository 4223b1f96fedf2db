#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (offline Bazel). Ends with the line
#   N passed, N failed, N skipped
# counted over test cases (gtest cases; one per shell test). Exit status: Bazel's.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh || exit 1

rc=0
# A hang-up does not end the run (nohup's choice): a stray SIGHUP once killed the Bazel client
# mid-run while the tests went on. Ctrl-C still stops it.
trap '' HUP
bazel test --config=ci //... "$@" || rc=$?
# Every fuzz target for a bounded time (COHORT_FUZZ_SECONDS, default 10; tools/fuzz.sh 60 is the
# full run), counted as one test case each; not when only some tests were asked for.
rm -rf fuzz-artifacts/reports
if [ $# -eq 0 ]; then
  FUZZ_REPORT_DIR=fuzz-artifacts/reports tools/fuzz.sh "${COHORT_FUZZ_SECONDS:-10}" || rc=1
fi

# Bazel's own summary counts targets; count test cases from the JUnit XML of this run's targets.
/usr/bin/python3 - "$rc" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
rc = int(sys.argv[1])
passed = failed = skipped = 0
for path in (glob.glob("bazel-testlogs/**/test.xml", recursive=True) +
             glob.glob("fuzz-artifacts/reports/*.xml")):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        failed += 1
        continue
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("result") == "skipped":
            skipped += 1
        else:
            passed += 1
if rc != 0 and failed == 0:
    failed = 1  # the build itself failed, or a test died before writing its report
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $rc
