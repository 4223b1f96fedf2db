#!/bin/sh
# Stand-in for //services:shard in the launcher's tests: prints its arguments and environment,
# writes its metrics port file (9300 + rank), then runs until the fake scheduler leaves job.done in FAKE_DIR. FAKE_SHARD=deaf ignores
# SIGTERM, so only SIGKILL stops it.
set -u
echo "args: $*"
echo "env: COHORT_ROLE=$COHORT_ROLE COHORT_RANK=$COHORT_RANK" \
  "COHORT_SCHEDULER=$COHORT_SCHEDULER OMP_NUM_THREADS=$OMP_NUM_THREADS"
for arg in "$@"; do
  case "$arg" in
    --metrics_port_file=*) echo $((9300 + COHORT_RANK)) > "${arg#*=}" ;;
  esac
done
if [ "${FAKE_SHARD:-}" = deaf ]; then trap '' TERM; fi
until [ -e "$FAKE_DIR/job.done" ]; do sleep 0.1; done
echo "stopping"
