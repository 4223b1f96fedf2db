#!/bin/sh
# Stand-in for //services:scheduler in the launcher's tests (launch_fixture.py). FAKE_DIR, from
# the test through the launcher's environment, is where the fakes meet.
# Prints its arguments and environment, writes its port file and its metrics port file (9100)
# as the real one does (write, then rename), and ends the job once every worker has left worker-<rank>.done in FAKE_DIR: writes
# job.done (the shards' signal to stop) and exits 0. FAKE_SCHEDULER changes that:
#   exit3  exits 3 before writing the port file
#   mute   never writes the port file
#   stay   never ends the job
set -u
for arg in "$@"; do
  case "$arg" in
    --port_file=*) port_file=${arg#*=} ;;
    --metrics_port_file=*) metrics_port_file=${arg#*=} ;;
    --num_workers=*) num_workers=${arg#*=} ;;
  esac
done
echo "args: $*"
echo "env: COHORT_ROLE=$COHORT_ROLE COHORT_RANK=${COHORT_RANK:-unset}" \
  "COHORT_SCHEDULER=${COHORT_SCHEDULER:-unset} OMP_NUM_THREADS=$OMP_NUM_THREADS"
case "${FAKE_SCHEDULER:-}" in
  exit3) echo "failing at once" >&2; exit 3 ;;
  mute) while :; do sleep 0.1; done ;;
esac
echo 9100 > "$metrics_port_file.tmp" && mv "$metrics_port_file.tmp" "$metrics_port_file"
echo 4242 > "$port_file.tmp" && mv "$port_file.tmp" "$port_file"
while :; do
  set -- "$FAKE_DIR"/worker-*.done
  if [ "${FAKE_SCHEDULER:-}" != stay ] && [ -e "$1" ] && [ $# -ge "$num_workers" ]; then
    touch "$FAKE_DIR/job.done"
    echo "job done"
    exit 0
  fi
  sleep 0.1
done
