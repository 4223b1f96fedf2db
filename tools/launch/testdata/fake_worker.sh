#!/bin/sh
# Stand-in for //services:worker in the launcher's tests: prints its flags, the job it learned
# from the environment and a line on stderr, leaves worker-<rank>.started in FAKE_DIR, then
# finishes (leaving worker-<rank>.done, which the fake scheduler waits for) unless a flag says
# otherwise. It writes 9200 + rank to COHORT_METRICS_PORT_FILE; with FAKE_TARGETS set, it waits
# until that target list names its port and copies it to targets-<rank>.json in FAKE_DIR. Flags:
#   --fail_rank=R --fail_code=C   rank R exits with status C instead
#   --kill_rank=R                 rank R kills itself with SIGKILL instead
#   --hang                        never finishes
#   --partial                     the last line printed has no newline
#   --bad_flags                   fails the launcher's check of the flags (--validate_only)
set -u
case " $* " in
  *" --validate_only "*)
    case " $* " in *" --bad_flags "*) echo "worker: error: --bad_flags: not a flag" >&2; exit 2 ;; esac
    exit 0 ;;
esac
rank=$COHORT_RANK
fail_rank=none fail_code=1 kill_rank=none hang=0 partial=0
for arg in "$@"; do
  case "$arg" in
    --fail_rank=*) fail_rank=${arg#*=} ;;
    --fail_code=*) fail_code=${arg#*=} ;;
    --kill_rank=*) kill_rank=${arg#*=} ;;
    --hang) hang=1 ;;
    --partial) partial=1 ;;
  esac
done
echo "args: $*"
echo "env: COHORT_JOB_ID=$COHORT_JOB_ID COHORT_ROLE=$COHORT_ROLE COHORT_RANK=$COHORT_RANK" \
  "COHORT_NUM_WORKERS=$COHORT_NUM_WORKERS COHORT_NUM_SHARDS=$COHORT_NUM_SHARDS" \
  "COHORT_SCHEDULER=$COHORT_SCHEDULER COHORT_MODE=$COHORT_MODE" \
  "OMP_NUM_THREADS=$OMP_NUM_THREADS OMP_WAIT_POLICY=${OMP_WAIT_POLICY-unset}"
echo "to stderr" >&2
touch "$FAKE_DIR/worker-$rank.started"
echo $((9200 + rank)) > "$COHORT_METRICS_PORT_FILE"
if [ -n "${FAKE_TARGETS:-}" ]; then
  until grep -q "127.0.0.1:$((9200 + rank))" "$FAKE_TARGETS" 2>/dev/null; do sleep 0.05; done
  cp "$FAKE_TARGETS" "$FAKE_DIR/targets-$rank.json"
fi
if [ "$rank" = "$fail_rank" ]; then echo "failing with status $fail_code"; exit "$fail_code"; fi
if [ "$rank" = "$kill_rank" ]; then echo "killing myself"; kill -9 $$; fi
if [ "$hang" = 1 ]; then while :; do sleep 0.1; done; fi
touch "$FAKE_DIR/worker-$rank.done"
if [ "$partial" = 1 ]; then printf 'no newline'; else echo "done"; fi
